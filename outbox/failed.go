package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// FailedMessage is a message the relays gave up on after MaxAttempts
// failed publications: kept in the table, not dropped, until Redrive puts
// it back. It is a plain value: it may be read from several goroutines at
// once, but not changed (its Payload and Headers included) while others
// read it.
type FailedMessage struct {
	Message
	Attempts  int
	LastError string
	CreatedAt time.Time
}

// Failed returns up to limit failed messages, oldest first (limit <= 0
// means 100).
func (o *Outbox) Failed(ctx context.Context, limit int) ([]FailedMessage, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := o.pool.Query(ctx, `SELECT id, topic, key, payload, headers, attempts, coalesce(last_error, ''), created_at
FROM `+o.names.quoted+` WHERE state = 2 ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: failed: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FailedMessage, error) {
		var f FailedMessage
		err := row.Scan(&f.ID, &f.Topic, &f.Key, &f.Payload, &f.Headers, &f.Attempts, &f.LastError, &f.CreatedAt)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: failed: %w", err)
	}
	return out, nil
}

// Redrive makes the failed messages with the given IDs pending again, their
// attempts reset, and wakes the relays; it returns how many it found
// failed. A redriven message is published after its Key's messages that are
// pending, not in its original place. It takes the Keys' locks of all the
// given IDs (failed or not yet) as Enqueue does, so it waits for the
// transactions that are enqueueing for those Keys. A message whose
// enqueueing transaction had not committed when Redrive began is left
// failed, its Key not locked.
func (o *Outbox) Redrive(ctx context.Context, ids ...string) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		// A Key's uncommitted rows must stay younger than its committed
		// ones (see claimSQL): the new seq is taken under the Key's lock,
		// after the open transactions of the Key commit. The Keys of all
		// the IDs are locked, failed or not now: a row still pending may
		// be failed by the time the update below reads it. A row committed
		// after the Keys were read has a Key that may not be locked: the
		// update leaves it alone.
		rows, err := tx.Query(ctx, `SELECT DISTINCT key FROM `+o.names.quoted+` WHERE id = ANY($1) AND key <> ''`, ids)
		if err != nil {
			return err
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			slices.Sort(keys) // Enqueue's order
			if _, err := tx.Exec(ctx, o.names.lockKeysSQL, o.names.lockPrefix, keys); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE `+o.names.quoted+` SET state = 0, attempts = 0, next_try_at = now(), seq = DEFAULT
WHERE state = 2 AND id = ANY($1) AND (key = '' OR key = ANY($2::text[]))`, ids, keys)
		if err != nil {
			return err
		}
		if n = tag.RowsAffected(); n > 0 {
			_, err = tx.Exec(ctx, `SELECT pg_notify($1, '')`, o.names.channel)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: redrive: %w", err)
	}
	return n, nil
}

// Stats counts an Outbox's rows by state; a plain value of three
// counts, safe to copy and to read from several goroutines at once.
type Stats struct {
	Pending, Published, Failed int64
}

// Stats returns the number of rows in each state (a full count: for
// monitoring and tests, not for a hot path).
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := o.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 0), count(*) FILTER (WHERE state = 1),
	count(*) FILTER (WHERE state = 2) FROM `+o.names.quoted).Scan(&s.Pending, &s.Published, &s.Failed)
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	return s, nil
}

// DeletePublished deletes published rows older than olderThan (which must
// be positive: ErrInvalidAge), at most batch per statement (batch <= 0
// means 1000), statement after statement until none is left, and returns
// how many it deleted. Rows another cleanup is deleting are skipped, not
// waited for. The Relay calls it every cleanup period.
func (o *Outbox) DeletePublished(ctx context.Context, olderThan time.Duration, batch int) (int64, error) {
	n, err := deleteInBatches(ctx, o.pool, `DELETE FROM `+o.names.quoted+` WHERE seq IN (
	SELECT seq FROM `+o.names.quoted+` WHERE state = 1 AND published_at < now() - make_interval(secs => $1)
	ORDER BY published_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, olderThan, batch)
	if err != nil {
		return n, fmt.Errorf("outbox: delete published: %w", err)
	}
	return n, nil
}

// deleteInBatches runs the DELETE statement del, whose $1 is an age in
// seconds and $2 a row limit, until it deletes fewer than batch rows. An
// age of zero or less is refused with ErrInvalidAge.
func deleteInBatches(ctx context.Context, pool *pgxpool.Pool, del string, olderThan time.Duration, batch int) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("%w (got %v)", ErrInvalidAge, olderThan)
	}
	if batch <= 0 {
		batch = 1000
	}
	var total int64
	for {
		tag, err := pool.Exec(ctx, del, olderThan.Seconds(), batch)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
