package outbox_test

import (
	"context"
	"errors"
	"strconv"
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

// TestUnkeyedMessagesInBackoffDoNotHoldUpTheRest: unkeyed messages waiting
// for their retry, more than a claim's window of them, leave the window:
// a ready message behind them is published (unkeyed messages have no
// order to keep).
func TestUnkeyedMessagesInBackoffDoNotHoldUpTheRest(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	var bad []outbox.Message
	for i := range 80 { // above the window of batch size 1: 4*1 + 64
		bad = append(bad, outbox.Message{ID: "bad-" + strconv.Itoa(i), Topic: "bad"})
	}
	enqueue(t, pool, o, bad...)
	enqueue(t, pool, o, outbox.Message{ID: "good", Topic: "good"})
	// Every bad message has failed once and waits an hour for its retry.
	if _, err := pool.Exec(ctx, `UPDATE `+o.Table()+` SET attempts = 1, next_try_at = now() + interval '1 hour' WHERE topic = 'bad'`); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if n, err := o.Relay(rec, outbox.WithBatchSize(1)).RunOnce(ctx); err != nil || n != 1 || rec.messages()[0].ID != "good" {
		t.Fatalf("RunOnce = %d, %v, published %v; want the good message", n, err, rec.messages())
	}
}
