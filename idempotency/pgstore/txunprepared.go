package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// sqlstateUnprepared is PostgreSQL's invalid_sql_statement_name: the
// statement named in a Bind does not exist, which is what a statement
// that the Tx prepared (see Tx.prepare) fails with once a DEALLOCATE on
// its connection dropped it, pgx still counting it prepared.
const sqlstateUnprepared = "26000"

// isUnprepared reports whether one of errs is sqlstateUnprepared.
func isUnprepared(errs ...error) bool { return anySQLState(sqlstateUnprepared, errs) }

// deallocatingTag reports whether tag is DEALLOCATE's: of one prepared
// statement, or of all.
func deallocatingTag(tag pgconn.CommandTag) bool {
	return tag.String() == "DEALLOCATE" || tag.String() == "DEALLOCATE ALL"
}

// forgetPrepared makes the prepared statements of the Tx's connection
// match what pgx counts on again, after a DEALLOCATE that pgx did not
// send (a handler's, through its transaction or its Conn): it drops them
// all, on both sides (pgx.Conn.DeallocateAll), and the Tx prepares its own
// again on their next use (Tx.prepare), as pgx does with its statement
// cache. One round trip, which fails in a transaction that failed.
func (t *Tx) forgetPrepared(ctx context.Context) error {
	if err := t.pgxConn.DeallocateAll(ctx); err != nil {
		return fmt.Errorf("pgstore: forgetting the prepared statements that a DEALLOCATE dropped: %w", err)
	}
	return nil
}

// discardConn closes the connection of a Tx whose prepared statements may
// not match pgx's count of them any more (a statement failed with
// sqlstateUnprepared in a transaction that it failed, where forgetPrepared
// cannot run), rather than return it to the pool, where every request of
// the store on it would fail the same way. Its caller holds lk, and it
// ends the Tx (see release).
func (t *Tx) discardConn() {
	t.finished = true
	if t.h != nil {
		t.h.ended.Store(true)
	}
	if c := t.takeConn(); c != nil {
		closeConn(c)
	}
}
