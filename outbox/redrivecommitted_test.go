package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestRedriveLocksTheKeyOfARowCommittedMeanwhile: Redrive reads the Keys
// of the given IDs, then locks them, then redrives the rows failed by then.
// A message whose enqueueing transaction was still open when the Keys were
// read is not among them; if it commits, is published and fails while
// Redrive waits for another Key's lock, it must not be redriven without
// its own Key's lock: a transaction enqueueing for that Key may be open,
// and the redriven row would take a place after that transaction's
// uncommitted row: one message in two Publish calls at once, and the Key
// out of order. Leaving it failed is fine: Redrive could not have been
// told of it by Failed.
func TestRedriveLocksTheKeyOfARowCommittedMeanwhile(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	enqueue(t, pool, o, msg("a", "k1"))
	failing := &recorder{fail: func(int, []outbox.Message) error { return errors.New("no") }}
	drain(t, o.Relay(failing, outbox.WithMaxAttempts(1)))

	// b is being enqueued, not committed: Redrive(a, b) cannot see it.
	open0, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open0.Rollback(ctx) //nolint:errcheck
	if err := o.Enqueue(ctx, open0, msg("b", "k2")); err != nil {
		t.Fatal(err)
	}
	// An open transaction holds k1's lock: Redrive(a, b) waits for it.
	open1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open1.Rollback(ctx) //nolint:errcheck
	if err := o.Enqueue(ctx, open1, msg("x", "k1")); err != nil {
		t.Fatal(err)
	}
	var redriven int64
	redrive := start(func() (err error) { redriven, err = o.Redrive(ctx, "a", "b"); return err })
	testenv.Eventually(t, "Redrive waits for k1's lock", func() bool {
		return redrive.done() || keyLockWaited(t, pool, o, "k1")
	})
	if redrive.done() {
		t.Fatalf("Redrive returned (%v) while k1's lock was held", redrive.wait())
	}
	// Meanwhile b commits and fails, and a transaction enqueues y for k2.
	if err := open0.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	drain(t, o.Relay(failing, outbox.WithMaxAttempts(1)))
	open2, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open2.Rollback(ctx) //nolint:errcheck
	if err := o.Enqueue(ctx, open2, msg("y", "k2")); err != nil {
		t.Fatal(err)
	}
	if err := open1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	k2 := raceRelaysPastRedrive(t, o, pool, redrive, open2, "k2")
	want, stats := "y,b", outbox.Stats{Published: 4}
	if redriven == 1 { // b left failed
		want, stats = "y", outbox.Stats{Published: 3, Failed: 1}
	}
	if strings.Join(k2, ",") != want {
		t.Errorf("k2 published as %v after %d redriven; want %s", k2, redriven, want)
	}
	if s, err := o.Stats(ctx); err != nil || s != stats {
		t.Errorf("Stats = %+v, %v; want %+v", s, err, stats)
	}
}

// TestRedriveWaitsForTheKeysOpenEnqueue: a failed message redriven while a
// transaction that enqueued for its Key is still open must not take a
// place before that transaction's row: otherwise a relay takes the
// redriven row for the Key's head, and once the transaction commits,
// another relay takes its older row for the head and the redriven one
// behind it, while the first still publishes it: one message in two
// Publish calls at once.
func TestRedriveWaitsForTheKeysOpenEnqueue(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	enqueue(t, pool, o, msg("x", "k"))
	failing := &recorder{fail: func(int, []outbox.Message) error { return errors.New("no") }}
	drain(t, o.Relay(failing, outbox.WithMaxAttempts(1)))
	if s, err := o.Stats(ctx); err != nil || s.Failed != 1 {
		t.Fatalf("Stats = %+v, %v; want x failed", s, err)
	}

	open, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback(ctx) //nolint:errcheck
	if err := o.Enqueue(ctx, open, msg("n", "k")); err != nil {
		t.Fatal(err)
	}
	redrive := start(func() error { _, err := o.Redrive(ctx, "x"); return err })
	raceRelaysPastRedrive(t, o, pool, redrive, open, "k")
	if s, err := o.Stats(ctx); err != nil || s != (outbox.Stats{Published: 2}) {
		t.Errorf("Stats = %+v, %v; want both published", s, err)
	}
}
