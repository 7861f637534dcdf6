package outbox_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
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

// keyLockWaited reports whether a session waits for the per-Key advisory
// lock of key on o's table (the lock Enqueue and Redrive take).
func keyLockWaited(t *testing.T, pool *pgxpool.Pool, o *outbox.Outbox, key string) bool {
	t.Helper()
	name := "saferetry/outbox/" + strings.Trim(o.Table(), `"`) + "/key/" + key
	var waiting bool
	err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'
	AND NOT granted AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0))`, name).Scan(&waiting)
	if err != nil {
		t.Fatal(err)
	}
	return waiting
}

// TestRedriveLocksTheKeyOfARowThatFailsMeanwhile: Redrive reads the Keys
// to lock, then redrives the rows failed by the time it updates them. A
// message given to Redrive that was still pending when the Keys were read
// (redriven by someone else, being published) and failed while Redrive
// waited for another Key's lock, must not be redriven without its own
// Key's lock: a transaction that enqueued for that Key may be open, and
// the redriven row would take a place after that transaction's
// uncommitted row, so that one relay takes it for the Key's head while,
// once the transaction commits, another takes the older row and the
// redriven one behind it: one message in two Publish calls at once, and
// the Key out of order.
func TestRedriveLocksTheKeyOfARowThatFailsMeanwhile(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	enqueue(t, pool, o, msg("a", "k1"), msg("b", "k2"))
	failing := &recorder{fail: func(int, []outbox.Message) error { return errors.New("no") }}
	drain(t, o.Relay(failing, outbox.WithMaxAttempts(1)))
	// b is pending again (someone redrove it), a still failed.
	if n, err := o.Redrive(ctx, "b"); err != nil || n != 1 {
		t.Fatalf("Redrive(b) = %d, %v; want 1", n, err)
	}

	// An open transaction holds k1's lock: Redrive(a, b) waits for it,
	// having read the Keys of the failed rows among a and b: k1 only.
	open1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open1.Rollback(ctx) //nolint:errcheck
	if err := o.Enqueue(ctx, open1, msg("x", "k1")); err != nil {
		t.Fatal(err)
	}
	redrive := start(func() error { _, err := o.Redrive(ctx, "a", "b"); return err })
	testenv.Eventually(t, "Redrive waits for k1's lock", func() bool {
		return redrive.done() || keyLockWaited(t, pool, o, "k1")
	})
	if redrive.done() {
		t.Fatalf("Redrive returned (%v) while k1's lock was held", redrive.wait())
	}
	// Meanwhile b fails again, and a transaction enqueues y for k2.
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
	if strings.Join(k2, ",") != "y,b" {
		t.Errorf("k2 published as %v; want y (committed before b was redriven), then b", k2)
	}
	if s, err := o.Stats(ctx); err != nil || s != (outbox.Stats{Published: 4}) {
		t.Errorf("Stats = %+v, %v; want all 4 published", s, err)
	}
}

// TestHugeBatchSizePublishes: a batch size meant as "no limit" must not
// wrap the claim's window (4 × the batch size + 64) around to a negative
// LIMIT, which PostgreSQL refuses: the relay would publish nothing, ever.
func TestHugeBatchSizePublishes(t *testing.T) {
	o, pool := newOutbox(t)
	enqueue(t, pool, o, msg("m", "k"))
	rec := &recorder{}
	if n, err := o.Relay(rec, outbox.WithBatchSize(math.MaxInt)).RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1, nil", n, err)
	}
}

// raceRelaysPastRedrive plays out a Redrive race to its end: open holds
// key's lock with an uncommitted row of key, and redrive runs. Once
// Redrive returns or waits for key's lock, one relay is let into Publish,
// open commits, Redrive returns, a second relay runs beside the first;
// then both finish and the rest is drained. It fails t when a message was
// in two Publish calls at once, and returns the IDs published under key,
// in order.
func raceRelaysPastRedrive(t *testing.T, o *outbox.Outbox, pool *pgxpool.Pool, redrive *call, open pgx.Tx, key string) []string {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, "Redrive returns or waits for the Key's lock", func() bool {
		return redrive.done() || keyLockWaited(t, pool, o, key)
	})
	rec := &recorder{}
	g := &gated{rec: rec, entered: make(chan struct{}), open: make(chan struct{})}
	first := start(func() error { _, err := o.Relay(g).RunOnce(ctx); return err })
	testenv.Eventually(t, "the first relay publishes or returns", func() bool {
		select {
		case <-g.entered:
			return true
		default:
			return first.done()
		}
	})
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := redrive.wait(); err != nil {
		t.Fatalf("Redrive: %v", err)
	}
	second := start(func() error { _, err := o.Relay(rec).RunOnce(ctx); return err })
	testenv.Eventually(t, "the second relay publishes or returns", func() bool {
		if second.done() {
			return true
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.calls >= 2 || (first.done() && rec.calls >= 1)
	})
	close(g.open)
	if err := second.wait(); err != nil {
		t.Fatal(err)
	}
	if err := first.wait(); err != nil {
		t.Fatal(err)
	}
	drain(t, o.Relay(rec))
	if len(rec.overlaps) > 0 {
		t.Errorf("messages in two Publish calls at once: %v", rec.overlaps)
	}
	var ids []string
	for _, m := range rec.messages() {
		if m.Key == key {
			ids = append(ids, m.ID)
		}
	}
	return ids
}
