package pgstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxBatchesInEveryExecMode runs transactional mode's claim and
// completion batches in every exec mode: a first execution (the claim
// begins the transaction the handler writes in, with the session's
// lock_timeout and read committed, invisible outside until the commit), a
// replay (no transaction left open: the connection goes back to the pool
// idle, not closed), a claim whose row is gone before the commit (nothing
// kept, the connection rolled back and reused) and a claim that times out
// on a lock (in progress, no transaction left open). It also checks the
// lease mode fast path in the same mode. In QueryExecModeSimpleProtocol
// pgx sends a batch as one query string of several statements, which
// PostgreSQL runs in one implicit transaction block, stopping at the first
// error: the same as the extended protocol's statements up to one Sync.
func TestTxBatchesInEveryExecMode(t *testing.T) {
	for _, mode := range execModes {
		t.Run(modeName(mode), func(t *testing.T) {
			const conns = 2
			pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode; c.MaxConns = conns })
			other := newPool(t)
			s := newTxStore(t, pool, pgstore.WithLockTimeout(30*time.Millisecond))
			biz := bizTable(t, other, s)
			ctx := ctxT(t)

			// A first execution.
			k := key("first")
			tx, r, ptx := acquire(t, s, k)
			if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ($1::text)`, "order-1"); err != nil {
				t.Fatal(err)
			}
			var lockTimeout, isolation string
			if err := ptx.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('transaction_isolation')`).Scan(&lockTimeout, &isolation); err != nil {
				t.Fatal(err)
			}
			if lockTimeout != "0" || isolation != "read committed" {
				t.Errorf("the handler runs with lock_timeout %q and isolation %q; want the session's 0 and read committed", lockTimeout, isolation)
			}
			if _, found, err := pgstore.New(other, pgstore.WithTable(s.Table())).Get(ctx, k); err != nil || found {
				t.Fatalf("Get from another connection before the commit: found=%v err=%v", found, err)
			}
			if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("made")}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if n := bizRows(t, other, biz); n != 1 {
				t.Fatalf("business rows after the commit = %d, want 1", n)
			}

			// A replay: one batch, and no transaction to roll back.
			tx2, r2 := beginClaim(t, s, k, "fp")
			if r2.Acquired || r2.Entry.State != idempotency.StateCompleted || string(r2.Entry.Response.Body) != "made" {
				t.Fatalf("replay Claim = %+v", r2)
			}
			if err := tx2.Rollback(ctx); err != nil {
				t.Fatal(err)
			}

			// The claim's row is gone before the commit (deleted through
			// the handler's own transaction): nothing is kept.
			k3 := key("gone")
			tx3, r3, ptx3 := acquire(t, s, k3)
			if _, err := ptx3.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ($1::text)`, "order-3"); err != nil {
				t.Fatal(err)
			}
			if _, err := ptx3.Exec(ctx, `DELETE FROM "`+s.Table()+`" WHERE key = $1::text`, k3.Key); err != nil {
				t.Fatal(err)
			}
			err := tx3.Complete(ctx, k3, r3.Token, idempotency.Response{Status: 201}, time.Hour)
			if err == nil {
				err = tx3.Commit(ctx)
			}
			if !errors.Is(err, idempotency.ErrStaleToken) {
				t.Fatalf("Complete and Commit of a claim whose row is gone = %v; want ErrStaleToken", err)
			}
			if err := tx3.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if n := bizRows(t, other, biz); n != 1 {
				t.Fatalf("business rows after the failed commit = %d, want 1", n)
			}

			// A claim that waits longer than the lock timeout.
			k4 := key("busy")
			holder, r4 := beginClaim(t, s, k4, "fp")
			if !r4.Acquired {
				t.Fatalf("Claim = %+v", r4)
			}
			tx5, r5 := beginClaim(t, s, k4, "fp")
			if r5.Acquired || r5.Entry.State != idempotency.StateInProgress {
				t.Fatalf("Claim behind an uncommitted claim = %+v; want in progress", r5)
			}
			if err := tx5.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := holder.Rollback(ctx); err != nil {
				t.Fatal(err)
			}

			// The lease mode fast path, in the same mode.
			fast := fastPathOn(t, pool, s.Table())
			fr, err := fast.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || fr.Acquired || fr.Entry.State != idempotency.StateCompleted || string(fr.Entry.Response.Body) != "made" {
				t.Fatalf("fast path replay = %+v, %v", fr, err)
			}
			fr, err = fast.Claim(ctx, key("fresh"), "fp", time.Minute, time.Hour)
			if err != nil || !fr.Acquired {
				t.Fatalf("fast path first claim = %+v, %v", fr, err)
			}

			// No connection was left in a transaction and closed.
			if n := pool.Stat().NewConnsCount(); n > conns {
				t.Errorf("the pool opened %d connections, want at most %d: some were closed after leaving a transaction open", n, conns)
			}
		})
	}
}

// TestTxHandlerTxRefusedAfterEnd checks that the transaction a handler got
// refuses statements once the request's transaction committed or rolled
// back: its connection is back in the pool, maybe in another request.
func TestTxHandlerTxRefusedAfterEnd(t *testing.T) {
	for _, name := range []string{"commit", "rollback"} {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			k := key("ended")
			tx, r, ptx := acquire(t, newTxStore(t, nil), k)
			if name == "commit" {
				commitOutcome(t, tx, k, r.Token)
			} else if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := ptx.Exec(ctx, `SELECT 1`); !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("Exec after the end = %v; want pgx.ErrTxClosed", err)
			}
			var one int
			if err := ptx.QueryRow(ctx, `SELECT 1`).Scan(&one); !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("QueryRow after the end = %v; want pgx.ErrTxClosed", err)
			}
			if err := ptx.SendBatch(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{{SQL: "SELECT 1"}}}).Close(); !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("SendBatch after the end = %v; want pgx.ErrTxClosed", err)
			}
		})
	}
}

// TestTxReadCommittedWhateverTheSessionDefault checks that a session whose
// default isolation level is not read committed still gets a read
// committed transaction (the claim then begins the transaction block
// first, in a round trip of its own).
func TestTxReadCommittedWhateverTheSessionDefault(t *testing.T) {
	pool := newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	})
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	k := key("iso")
	tx, r, ptx := acquire(t, s, k)
	var isolation string
	if err := ptx.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&isolation); err != nil || isolation != "read committed" {
		t.Fatalf("the handler's isolation = %q, %v; want read committed", isolation, err)
	}
	if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("ok")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx2, r2 := beginClaim(t, s, k, "fp")
	if r2.Acquired || string(r2.Entry.Response.Body) != "ok" {
		t.Fatalf("replay = %+v", r2)
	}
	if err := tx2.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTxContextBeforeClaim checks that a transaction handed out before any
// claim (as tests of handlers do) begins at its first statement and
// commits or rolls back with the Tx.
func TestTxContextBeforeClaim(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	for _, commit := range []bool{false, true} {
		tx, err := s.BeginTx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := handlerTx(t, tx).Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ($1::text)`, fmt.Sprint("order-", commit)); err != nil {
			t.Fatal(err)
		}
		if n := bizRows(t, pool, biz); n != 0 {
			t.Fatalf("rows visible before the end of the transaction: %d", n)
		}
		endTx(t, tx, commit)
	}
	if n := bizRows(t, pool, biz); n != 1 {
		t.Fatalf("rows after a rollback and a commit = %d, want 1", n)
	}
}
