package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockEndWait bounds how long TestTxEndRefusesLaterStatements waits for
// what must happen at once; the old lock waited for ever instead.
const lockEndWait = 2 * time.Second

// TestTxEndRefusesLaterStatements: a handler's goroutine that issues
// statements on the request's transaction in a tight loop after the
// handler returned (or several goroutines, one of them waiting for the
// lock). The request's Commit, or Rollback, waited for the statement
// running, as it must, but the lock never went to it: a statement that
// asked after the Commit began to wait, or was waiting already, took the
// lock first and ran, and committed with the request, against the doc
// (every later one is refused with pgx.ErrTxClosed), and a loop delayed
// the Commit as long as it went on. Now once the request's end asks for
// the lock, every statement of the handler that asks, or waits, is
// refused at once with pgx.ErrTxClosed; the one running is still waited
// for. No connection is needed: the Tx has no claim, and the statements
// are their lock.
func TestTxEndRefusesLaterStatements(t *testing.T) {
	for _, end := range []struct {
		name string
		f    func(*Tx, context.Context) error
	}{{"Commit", (*Tx).Commit}, {"Rollback", (*Tx).Rollback}} {
		t.Run(end.name, func(t *testing.T) {
			ctx := context.Background()
			tx := &Tx{}
			h := tx.PgxTx().(*handlerTx)

			// A statement of the handler's goroutine runs: it holds the lock.
			unlockRunning, err := h.lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Another statement waits for it.
			waited := make(chan error, 1)
			go func() {
				unlock, err := h.lock(ctx)
				if err == nil {
					unlock()
				}
				waited <- err
			}()
			waitForWaiter(t, &tx.lk)
			// The request ends.
			ended := make(chan error, 1)
			go func() { ended <- end.f(tx, ctx) }()

			select {
			case err := <-waited:
				if !errors.Is(err, pgx.ErrTxClosed) {
					t.Errorf("the statement waiting when the request's %s came = %v; want pgx.ErrTxClosed", end.name, err)
				}
			case <-time.After(lockEndWait):
				t.Errorf("the statement waiting when the request's %s came still waits after %v; want it refused at once with pgx.ErrTxClosed", end.name, lockEndWait)
			}
			lctx, cancel := context.WithTimeout(ctx, lockEndWait)
			defer cancel()
			if unlock, err := h.lock(lctx); !errors.Is(err, pgx.ErrTxClosed) {
				if err == nil {
					unlock()
				}
				t.Errorf("a statement asking while the request's %s waits = %v; want pgx.ErrTxClosed at once", end.name, err)
			}
			select {
			case err := <-ended:
				t.Fatalf("the request's %s returned (%v) while the handler's statement still ran", end.name, err)
			default:
			}

			// The running statement ends, and its goroutine's loop asks
			// for the next one at once.
			unlockRunning()
			if unlock, err := h.lock(ctx); !errors.Is(err, pgx.ErrTxClosed) {
				if err == nil {
					unlock()
				}
				t.Errorf("the loop's next statement after the request's %s asked = %v; want pgx.ErrTxClosed", end.name, err)
			}
			if err := <-ended; err != nil {
				t.Errorf("%s: %v", end.name, err)
			}
		})
	}
}

// waitForWaiter waits until a goroutine waits for l.
func waitForWaiter(t *testing.T, l *txLock) {
	t.Helper()
	for deadline := time.Now().Add(lockEndWait); ; {
		l.mu.Lock()
		waiting := l.changed != nil
		l.mu.Unlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the statement never waited for the lock")
		}
		time.Sleep(time.Millisecond)
	}
}
