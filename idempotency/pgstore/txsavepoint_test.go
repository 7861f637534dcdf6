package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
)

// TestTxHandlerSavepointRefusedAfterCommit checks that a savepoint the
// handler began on its transaction (pgx.Tx.Begin) refuses statements once
// the request's transaction committed, like the transaction itself: the
// COMMIT went in a batch, so pgx never learned that the transaction ended,
// and the savepoint would otherwise run statements on a connection back in
// the pool.
func TestTxHandlerSavepointRefusedAfterCommit(t *testing.T) {
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	k := key("savepoint")
	tx, r, ptx := acquire(t, s, k)
	sp, err := ptx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := sp.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commitOutcome(t, tx, k, r.Token)
	for name, kept := range map[string]pgx.Tx{"savepoint": sp, "nested savepoint": inner} {
		if _, err := kept.Exec(ctx, `SELECT 1`); !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("%s Exec after the commit = %v; want pgx.ErrTxClosed", name, err)
		}
		var one int
		if err := kept.QueryRow(ctx, `SELECT 1`).Scan(&one); !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("%s QueryRow after the commit = %v; want pgx.ErrTxClosed", name, err)
		}
		if c := kept.Conn(); c != nil {
			t.Errorf("%s Conn after the commit = %p; want nil", name, c)
		}
	}
	// The one connection is back in the pool, idle and usable.
	var status string
	if err := pool.QueryRow(ctx, `SELECT current_setting('transaction_isolation')`).Scan(&status); err != nil {
		t.Fatal(err)
	}
}

// TestTxSavepointsWorkInTheHandler checks that savepoints begun on the
// handler's transaction commit and roll back within it.
func TestTxSavepointsWorkInTheHandler(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("savepoints")
	tx, r, ptx := acquire(t, s, k)
	for i, commit := range []bool{true, false} {
		sp, err := ptx.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sp.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ($1::text)`, []string{"kept", "dropped"}[i]); err != nil {
			t.Fatal(err)
		}
		endTx(t, sp, commit)
	}
	commitOutcome(t, tx, k, r.Token)
	if n := bizRows(t, pool, biz); n != 1 {
		t.Fatalf("business rows = %d, want 1 (the released savepoint's)", n)
	}
}

// commitOutcome completes k's claim with token in tx and commits.
func commitOutcome(t *testing.T, tx idempotency.Tx, k idempotency.Key, token int64) {
	t.Helper()
	ctx := ctxT(t)
	if err := tx.Complete(ctx, k, token, idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}
