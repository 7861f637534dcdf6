package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestTxHandlerStatementInFlightAtCommit: a handler that hands its
// transaction to a goroutine (an audit write, fire and forget) and returns
// while the goroutine's statement is still running. The request's Commit
// then ran on the connection at the same time as that statement: pgx's
// connection is not safe for that (a data race on its state), the Commit
// failed with "conn busy" and the request was answered 503 with the
// handler's writes rolled back; and a statement that passed the guard's
// check just before the Commit released the connection ran on it back in
// the pool, in another request's transaction. Now the Commit waits for
// the statement in flight, which commits with the request, and every
// later one is refused with pgx.ErrTxClosed.
func TestTxHandlerStatementInFlightAtCommit(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("inflight")
	tx, r, ptx := acquire(t, s, k)
	late := make(chan error, 1)
	go func() {
		_, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) SELECT 'late' FROM pg_sleep(0.2)`)
		late <- err
	}()
	// Wait until the goroutine's statement runs on the server.
	for deadline := time.Now().Add(5 * time.Second); ; {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%pg_sleep%'`, biz).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the goroutine's statement never showed up in pg_stat_activity")
		}
		time.Sleep(time.Millisecond)
	}
	commitOutcome(t, tx, k, r.Token)
	if err := <-late; err != nil {
		t.Fatalf("the statement in flight at the commit failed: %v", err)
	}
	if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('after')`); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("a statement after the commit = %v; want pgx.ErrTxClosed", err)
	}
	if n := bizRows(t, pool, biz); n != 1 {
		t.Errorf("%d business rows; want 1, the statement in flight, committed with the request", n)
	}
}
