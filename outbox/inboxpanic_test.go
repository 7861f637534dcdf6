package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestInboxPanicLeavesNothing: fn writes its effect and panics while
// another delivery of the message waits on its inbox row; the panic goes
// up to Process's caller, who recovers it. Nothing of the panicking run
// may stay (effect, inbox row, a connection held in a transaction), and
// the waiting delivery runs fn: once, neither a duplicate of an effect
// that never committed nor stuck behind it.
func TestInboxPanicLeavesNothing(t *testing.T) {
	in, pool, effects := newInbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entered := make(chan struct{})
	panicked := make(chan error, 1)
	go func() {
		defer func() {
			p := recover()
			panicked <- fmt.Errorf("recovered: %v", p)
		}()
		_, _ = in.Process(ctx, "mailer", "m-1", func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ('m-1')`); err != nil {
				return err
			}
			close(entered)
			time.Sleep(100 * time.Millisecond) // the other delivery waits on the row
			panic("handler bug")
		})
	}()
	<-entered
	dup, err := in.Process(ctx, "mailer", "m-1", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ('m-1')`)
		return err
	})
	if err := <-panicked; err == nil {
		t.Fatal("no panic")
	}
	if dup || err != nil {
		t.Errorf("the waiting delivery: Process = %v, %v; want it to run fn", dup, err)
	}
	if n := effectsOf(t, pool, effects, "m-1"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	testenv.Eventually(t, "the pool's connections back", func() bool { return pool.Stat().AcquiredConns() == 0 })
}

// TestInboxManyConcurrentDeliveries: eight deliveries of one message at
// once, whose fn fails on its first three runs: the effect commits once,
// the deliveries after its commit say duplicate, the failed ones return
// their error.
func TestInboxManyConcurrentDeliveries(t *testing.T) {
	in, pool, effects := newInbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var runs, fails, oks, dups atomic.Int64
	errFlaky := errors.New("flaky")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dup, err := in.Process(ctx, "mailer", "m-1", func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ('m-1')`); err != nil {
					return err
				}
				time.Sleep(10 * time.Millisecond)
				if runs.Add(1) <= 3 {
					return errFlaky
				}
				return nil
			})
			switch {
			case errors.Is(err, errFlaky):
				fails.Add(1)
			case err != nil:
				t.Errorf("Process: %v", err)
			case dup:
				dups.Add(1)
			default:
				oks.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := effectsOf(t, pool, effects, "m-1"); n != 1 || oks.Load() != 1 || fails.Load() != 3 || dups.Load() != 4 {
		t.Errorf("%d effects, %d runs committed, %d failed, %d duplicates; want 1, 1, 3, 4", n, oks.Load(), fails.Load(), dups.Load())
	}
}
