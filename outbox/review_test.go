package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/saferetry/saferetry/outbox"
)

// TestBackoffAfterManyAttempts: a limit of attempts high enough to mean
// "retry forever" works past a thousand failures: the backoff stays at its
// maximum, the failure is counted (2^1024 overflows a float8; the mark
// must not fail, or the batch is rolled back and retried without end).
func TestBackoffAfterManyAttempts(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	enqueue(t, pool, o, msg("m", "k"))
	if _, err := pool.Exec(ctx, `UPDATE `+o.Table()+` SET attempts = 1100`); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{fail: func(int, []outbox.Message) error { return errors.New("broker down") }}
	r := o.Relay(rec, outbox.WithMaxAttempts(1<<30), outbox.WithBackoff(time.Millisecond, time.Second))
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1, nil", n, err)
	}
	var attempts int
	var wait float64
	if err := pool.QueryRow(ctx, `SELECT attempts, extract(epoch FROM next_try_at - now()) FROM `+o.Table()).Scan(&attempts, &wait); err != nil {
		t.Fatal(err)
	}
	if attempts != 1101 || wait > 1.5 {
		t.Errorf("attempts %d, next try in %.2f s; want 1101, at most the 1 s maximum", attempts, wait)
	}
}
