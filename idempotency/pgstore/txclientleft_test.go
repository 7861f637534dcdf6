package pgstore_test

import (
	"context"
	"testing"
	"time"
)

// TestTxRollbackAfterTheConnectionClosed: a handler's statement cut short
// by its context (the client left mid-request) makes pgx close the
// connection, and with it the session, which PostgreSQL rolls back. The
// request's Rollback then failed with "conn closed", and the Middleware
// logged a false "rollback failed" warning on every such request; it is a
// rollback like any other now, and the key is free again.
func TestTxRollbackAfterTheConnectionClosed(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("client-left")
	tx, _, ptx := acquire(t, s, k)
	if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('written')`); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := ptx.Exec(sctx, `SELECT pg_sleep(5)`); err == nil {
		t.Fatal("a statement cut short by its context succeeded")
	}
	if !ptx.Conn().IsClosed() {
		t.Fatal("pgx kept the connection of a statement cut short open; the test's premise is gone")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Errorf("Rollback after the connection closed = %v, want nil (the session's end rolled it back)", err)
	}
	if n := bizRows(t, pool, biz); n != 0 {
		t.Errorf("%d business rows; want 0", n)
	}
	tx2, r := beginClaim(t, s, k, "fp")
	if !r.Acquired {
		t.Errorf("Claim after the rollback = %+v, want it acquired", r)
	}
	endTx(t, tx2, false)
}
