package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestBackoffCountsFromTheFailure: a failed batch's next try is put off
// from when its publication failed, not from when the batch was claimed,
// so a Publish slower than the backoff (a broker that times out) is still
// backed off rather than retried at once.
func TestBackoffCountsFromTheFailure(t *testing.T) {
	ctx := context.Background()
	pool := testenv.PostgresPool(t)
	table := testenv.PostgresTable(t, pool, "outbox_test_")
	o := outbox.New(pool, outbox.WithTable(table))
	if err := o.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	enqueue(t, pool, o, msg("slow", "k"))
	const took, backoff = 400 * time.Millisecond, 300 * time.Millisecond
	rec := &recorder{fail: func(int, []outbox.Message) error {
		time.Sleep(took)
		return errors.New("broker timed out")
	}}
	r := o.Relay(rec, outbox.WithBackoff(backoff, backoff), outbox.WithMaxAttempts(10))
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	var attempts int
	var left float64 // seconds from now to the next try
	err := pool.QueryRow(ctx, `SELECT attempts, EXTRACT(EPOCH FROM next_try_at - clock_timestamp())::float8 FROM `+
		pgx.Identifier{table}.Sanitize()+` WHERE id = 'slow'`).Scan(&attempts, &left)
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Fatalf("attempts = %d, want 1 failed attempt", attempts)
	}
	if left < (backoff / 2).Seconds() {
		t.Fatalf("the next try is %.3fs from now, just after a failure backed off by %v: the backoff was not counted from the failure", left, backoff)
	}
}
