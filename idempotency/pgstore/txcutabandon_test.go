package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxCutShortCommitWhileAbandoned: a goroutine of the handler whose
// COMMIT was cut short by its context returned the connection, closed, to
// the pool (Tx.settleCutShort), holding the transaction's lock, while the
// request's Commit, whose wait for that lock ended with its context, and
// then its Rollback took the connection out of the pool (Tx.abandon): both
// wrote the Tx's connection field, unsynchronized (the race detector
// reported it), and the Rollback could hijack a connection already
// released. It runs with -race.
func TestTxCutShortCommitWhileAbandoned(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	// The COMMIT, cut short at 100 ms, ends a second after pgx's cancel
	// request: the settling waits for it that long, holding the lock.
	slowCommits(t, pool, biz, 2, 1)
	tx, _, ptx := acquire(t, s, key("cut-abandoned"))
	if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('written')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := ptx.Exec(cctx, "COMMIT")
		done <- err
	}()
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err := tx.Commit(cctx)
	if !errors.Is(err, pgstore.ErrStillHeld) {
		// The COMMIT ended, and the settling with it, before the Commit's
		// wait did (the cancel came before the trigger ran, on a loaded
		// machine): the interleaving did not happen.
		<-done
		t.Skipf("the request's Commit = %v, not a wait for the lock that ended; the test's premise did not hold", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Errorf("Rollback = %v, want nil (the Commit reported the failure)", err)
	}
	if err := <-done; err == nil {
		t.Error("the handler's COMMIT cut short succeeded")
	}
}
