package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/pgtext"
)

// errCutShortUnknown is the cause of the error of a handler's statement
// that may have committed the request's transaction and was cut short
// (see Tx.settleCutShort) when whether it did could not be told.
var errCutShortUnknown = errors.New("pgstore: the handler's statement that may have committed the request's transaction was cut short, and whether it committed is not known")

// mayCommit reports whether one of sqls, statements of the handler, may
// end the transaction block committing it: whether it names COMMIT or
// END as a word, in any case. It errs on the side of yes (a CASE ... END,
// a word in a string or comment), which costs settleCutShort a round
// trip, and is asked only of a statement cut short.
func mayCommit(sqls ...string) bool {
	for _, sql := range sqls {
		if hasWordFold(sql, "commit") || hasWordFold(sql, "end") {
			return true
		}
	}
	return false
}

// hasWordFold reports whether s holds word (lower case ASCII) as a whole
// word, in any case.
func hasWordFold(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if !strings.EqualFold(s[i:i+len(word)], word) {
			continue
		}
		if (i == 0 || !isWordByte(s[i-1])) && (i+len(word) == len(s) || !isWordByte(s[i+len(word)])) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

// settleCutShort runs after a statement of the handler that failed with
// err, with lk held. When the statement was cut short (its context ended:
// pgx closed the connection) and may have committed (mayCommit of sqls),
// PostgreSQL may still commit the transaction block without the client,
// or already have: pgx sends a cancel request as it closes, which comes
// too late for a COMMIT that is done or past its last check. The
// transaction status that pgx keeps is then stale ("in a block"), and
// nothing else tells: the claim, in progress, would stand committed with
// the handler's writes, and a retry take it over and run again. So the Tx
// waits, on another connection and bounded by the lock timeout, for that
// session's transaction to end (its lock on the claim's row), and looks:
// a claim it committed is recorded as completed but not replayable, as
// for a COMMIT that was not cut short (see ErrHandlerEndedTx), and the
// error wraps ErrHandlerEndedTx; one rolled back leaves err as it is.
// When the wait fails, the error wraps errCutShortUnknown, and the Tx is
// left as it is (its commit fails on the closed connection): a retry may
// then run again if the COMMIT went through later. The closed connection
// goes back to the pool first, which closes it, so that a pool of one
// connection has one for the wait.
func (t *Tx) settleCutShort(ctx context.Context, err error, sqls ...string) error {
	if err == nil || t.blockEnded || t.token == 0 || t.tx == nil || !t.pgxConn.IsClosed() || !mayCommit(sqls...) {
		return err
	}
	if c := t.takeConn(); c != nil {
		c.Release()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*t.store.cfg.lockTimeout)
	defer cancel()
	committed, serr := t.claimCommitted(ctx)
	switch {
	case serr != nil:
		return fmt.Errorf("%w: %w (%w)", errCutShortUnknown, err, serr)
	case !committed:
		return err
	}
	t.blockEnded, t.endRecorded, t.notReplayable = true, true, true
	t.closeLargeObjects()
	return fmt.Errorf("%w: %w", ErrHandlerEndedTx, err)
}

// claimCommitted waits on a connection of the pool for the transaction
// that holds (or held) the Tx's claim to end, and reports whether it
// committed the claim, in progress; if so, it records it as completed with
// status 500 but not replayable, in the same transaction. The wait for an
// uncommitted row of the key is an insert of the key (ON CONFLICT DO
// NOTHING), rolled back, and for a row the claim took over a lock on it
// (FOR UPDATE); each is bounded by the lock timeout (boundSQL). Its
// transaction is READ WRITE: the pool's sessions may default to read
// only (see Tx.beginThenClaim).
func (t *Tx) claimCommitted(ctx context.Context) (committed bool, err error) {
	conn, err := t.store.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	scope, key := pgtext.Encode(t.claimed.Scope), pgtext.Encode(t.claimed.Key)
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, t.store.boundSQL); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, t.store.sql.txWait, scope, key)
		if err != nil || tag.RowsAffected() == 1 {
			return errNotCommitted{err} // no row stood in the way: rolled back
		}
		var state int16
		var token int64
		err = tx.QueryRow(ctx, t.store.sql.txWaitRow, scope, key).Scan(&state, &token)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && (state != 1 || token != t.token) {
			return errNotCommitted{}
		}
		if err != nil {
			return err
		}
		ttlUS, err := ttlMicros(t.ttl)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, t.store.sql.complete,
			t.notReplayableArgs(scope, key, ttlUS)...)
		return err
	})
	var nc errNotCommitted
	if errors.As(err, &nc) {
		return false, nc.err
	}
	return err == nil, err
}

// errNotCommitted rolls claimCommitted's transaction back: the claim was
// not committed (err nil), or the wait failed (err).
type errNotCommitted struct{ err error }

func (e errNotCommitted) Error() string { return "pgstore: the claim was not committed" }
