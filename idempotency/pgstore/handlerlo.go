package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// largeObjects returns the LargeObjects of the handler's transaction,
// built on a savepoint of tx, begun once per Tx (one round trip), rather
// than on tx itself: pgx builds LargeObjects on a transaction of its own,
// whose statements no handlerTx sees, and the request's transaction, which
// its commit ends in a batch, never learns that it ended; a savepoint it
// does learn of (closeLargeObjects). The savepoint is left open: the
// request's COMMIT commits what ran in it, its ROLLBACK rolls it back,
// and the handler may roll back past it. Its caller holds lk.
func (t *Tx) largeObjects(ctx context.Context, tx pgx.Tx) (pgx.LargeObjects, error) {
	if t.lo == nil {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return pgx.LargeObjects{}, err
		}
		t.lo = sp
	}
	return t.lo.LargeObjects(), nil
}

// closeLargeObjects marks the savepoint of largeObjects closed, so that
// the LargeObjects built on it, and the large objects they opened, refuse
// every statement with pgx.ErrTxClosed from then on, once the request's
// transaction ended. It sends nothing: pgx closes a savepoint whose
// RELEASE fails, and a context already done fails it before it is sent
// (a query tracer sees it, failed). Its caller holds lk, before the
// connection goes back to the pool.
func (t *Tx) closeLargeObjects() {
	if t.lo == nil {
		return
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_ = t.lo.Commit(done) // fails: see above
	t.lo = nil
}
