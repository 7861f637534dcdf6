package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/pgschema"
	"github.com/saferetry/saferetry/internal/pgtext"
)

// Inbox makes a consumer idempotent: it records, in the transaction of the
// consumer's effect, which messages the consumer processed, so that a
// redelivered message is recognised and its effect not made twice. Create
// it with NewInbox; the zero value is not usable. It is safe for concurrent
// use by multiple goroutines and processes. Most callers want Process.
//
// Retention: a message's row must outlive every redelivery of it, that is
// the broker's redelivery window (for JetStream, as long as the stream
// keeps the message and a consumer may not have acknowledged it: the
// stream's MaxAge) plus the outbox's (a relay may publish a message again
// until its row is marked, and JetStream deduplicates only within the
// stream's Duplicates window). DeleteProcessed deletes rows older than a
// given age; keep it above that window, or never call it.
type Inbox struct {
	pool   *pgxpool.Pool
	table  string
	quoted string
}

// NewInbox returns an Inbox over pool (its table: DefaultInboxTable, or
// WithTable's). It panics when the WithTable name is invalid.
func NewInbox(pool *pgxpool.Pool, opts ...Option) *Inbox {
	table, err := tableOf(DefaultInboxTable, opts)
	if err != nil {
		panic(err)
	}
	q := pgschema.Quote(table, "")
	return &Inbox{pool: pool, table: table, quoted: q}
}

// InboxSchema returns the SQL that creates the inbox table named table,
// for migration tools; it is safe to run again. Columns: consumer and
// message_id (the primary key), processed_at (indexed for cleanup).
// Consumer and message_id are text: valid UTF-8 without NUL is kept as it
// is, anything else (and a string starting with the byte 0x01) as the
// byte 0x01 followed by its bytes in hex (see Process).
func InboxSchema(table string) (string, error) {
	if err := validTable(table); err != nil {
		return "", err
	}
	q := pgschema.Quote(table, "")
	return inboxSchemaSQL(table, q), nil
}

func inboxSchemaSQL(table, q string) string {
	_, bare := pgschema.Split(table)
	idx := `"` + bare + `_processed_idx"`
	reg := pgschema.Quote(table, "_processed_idx")
	return `CREATE TABLE IF NOT EXISTS ` + q + ` (
	consumer     text        NOT NULL,
	message_id   text        NOT NULL,
	processed_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (consumer, message_id)
);
DO $$
BEGIN
	IF to_regclass('` + reg + `') IS NULL THEN
		CREATE INDEX ` + idx + ` ON ` + q + ` (processed_at);
	END IF;
END
$$;
`
}

// CreateSchema creates the inbox table and its index if they do not exist.
// It is safe to call repeatedly and concurrently.
func (in *Inbox) CreateSchema(ctx context.Context) error {
	if err := pgschema.Apply(ctx, in.pool, "saferetry/inbox/"+in.table, inboxSchemaSQL(in.table, in.quoted)); err != nil {
		return fmt.Errorf("outbox: create inbox schema: %w", err)
	}
	return nil
}

// Process runs fn for the message messageID of consumer, once: it inserts
// (consumer, messageID) and runs fn in one transaction, which it commits
// when fn returns nil. When the pair is already recorded, it returns
// duplicate true and does not run fn. When fn (or the commit) fails, it
// returns the error and nothing of the attempt stays, so the message's
// redelivery runs fn again (its rollback is given up to 5 s after ctx
// ends, as the relay's statements that end a transaction are). Concurrent deliveries of one message wait for
// each other on the pair's row: one runs fn, the others report duplicate
// once it commits (or run fn, if it rolled back). fn must write its effect
// through tx only, and not commit or roll it back.
//
// Acknowledge the message to the broker only after Process returns nil:
// a crash between the commit and the acknowledgement makes the broker
// redeliver, and the redelivery is a duplicate.
//
// consumer and messageID may be any bytes (a JetStream Nats-Msg-Id is what
// its publisher chose), though PostgreSQL text holds only valid UTF-8
// without NUL: such strings are kept as they are, unless they start with
// the byte 0x01, and any other string as 0x01 followed by its bytes in hex,
// which no string kept as it is can be, so distinct pairs stay distinct.
// Rows written before this encoding hold valid text and keep matching,
// except a row whose consumer or message ID starts with 0x01: a
// redelivery of that message after the upgrade is not recognised, and
// runs fn again (and if the rest of that ID is hex, a message whose ID is
// the bytes it spells, when these need escaping, is taken for a
// duplicate).
func (in *Inbox) Process(ctx context.Context, consumer, messageID string, fn func(ctx context.Context, tx pgx.Tx) error) (duplicate bool, err error) {
	tx, err := in.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return false, fmt.Errorf("outbox: inbox begin: %w", err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		// It must reach the database also when ctx ends (Consume
		// stopping), and must not wait for ever on one that stopped
		// answering: settling bounds it, as the relay's.
		sctx, cancel := settling(ctx)
		defer cancel()
		_ = tx.Rollback(sctx)
	}()
	tag, err := tx.Exec(ctx, `INSERT INTO `+in.quoted+` (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		pgtext.Encode(consumer), pgtext.Encode(messageID))
	if err != nil {
		return false, fmt.Errorf("outbox: inbox insert: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return true, nil
	}
	if err := fn(ctx, tx); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("outbox: inbox commit: %w", err)
	}
	committed = true
	return false, nil
}

// DeleteProcessed deletes inbox rows older than olderThan (which must be
// positive: ErrInvalidAge), at most batch per statement (batch <= 0 means
// 1000), until none is left, and returns how many it deleted. See Inbox
// for how long rows must be kept.
func (in *Inbox) DeleteProcessed(ctx context.Context, olderThan time.Duration, batch int) (int64, error) {
	n, err := deleteInBatches(ctx, in.pool, `DELETE FROM `+in.quoted+` WHERE (consumer, message_id) IN (
	SELECT consumer, message_id FROM `+in.quoted+` WHERE processed_at < now() - make_interval(secs => $1)
	ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, olderThan, batch)
	if err != nil {
		return n, fmt.Errorf("outbox: delete processed: %w", err)
	}
	return n, nil
}
