package outbox_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/saferetry/saferetry/outbox"
)

// TestMaxAttemptsBeyondInt32CountsTheFailure: a limit of attempts of
// math.MaxInt, "never give up", still counts each failed publication and
// backs it off; the mark must not fail (the batch would be rolled back and
// retried at once, without end).
func TestMaxAttemptsBeyondInt32CountsTheFailure(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	enqueue(t, pool, o, msg("m", "k"))
	rec := &recorder{fail: func(int, []outbox.Message) error { return errors.New("broker down") }}
	r := o.Relay(rec, outbox.WithMaxAttempts(math.MaxInt), outbox.WithBackoff(time.Minute, time.Minute))
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1, nil", n, err)
	}
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT attempts FROM `+o.Table()).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Errorf("attempts = %d after one failed publication; want 1", attempts)
	}
}
