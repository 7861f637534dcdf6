package outbox_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/outbox"
)

// panicky is a Publisher whose first panics calls panic on a nil map, as
// a broker adapter with a bug would; then it hands over to rec.
type panicky struct {
	rec    *recorder
	panics atomic.Int64
	handed chan []outbox.Message // what the panicking calls were handed, if not nil
}

func (p *panicky) Publish(ctx context.Context, msgs []outbox.Message) error {
	if p.panics.Add(-1) >= 0 {
		if p.handed != nil {
			p.handed <- msgs
		}
		var sent map[string]bool
		sent[msgs[0].ID] = true // panics
	}
	return p.rec.Publish(ctx, msgs)
}

// rowAttempts returns each message's attempts and last error.
func rowAttempts(t *testing.T, pool *pgxpool.Pool, o *outbox.Outbox) map[string]struct {
	attempts int
	lastErr  string
} {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, attempts, coalesce(last_error, '') FROM `+o.Table())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		attempts int
		lastErr  string
	}{}
	for rows.Next() {
		var id, e string
		var n int
		if err := rows.Scan(&id, &n, &e); err != nil {
			t.Fatal(err)
		}
		out[id] = struct {
			attempts int
			lastErr  string
		}{n, e}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNothingHeld fails t unless none of pool's connections is taken
// and none of o's rows is locked.
func checkNothingHeld(t *testing.T, pool *pgxpool.Pool, o *outbox.Outbox) {
	t.Helper()
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections still taken from the relay's pool", n)
	}
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `SELECT seq FROM `+o.Table()+` FOR UPDATE NOWAIT`)
		return err
	})
	if err != nil {
		t.Errorf("the outbox's rows are still locked: %v", err)
	}
}

// checkOnce fails t unless rec got each of ids once, and nothing else.
func checkOnce(t *testing.T, rec *recorder, ids []string) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range rec.messages() {
		seen[m.ID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("message %s published %d times, want once (all: %v)", id, seen[id], seen)
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("published %v, want %v", seen, ids)
	}
}

// TestRunOncePublisherPanicCountsAnAttempt: RunOnce runs Publish on the
// caller's goroutine, so its panic goes up as it is, but only once the
// batch is left clean: its connection back in the pool, its rows
// unlocked, and its messages each counted a failed attempt, as for a
// failed Publish, so that a message the Publisher panics on every time is
// failed after WithMaxAttempts, and its Key's next message goes on,
// rather than handed to the Publisher again and again.
func TestRunOncePublisherPanicCountsAnAttempt(t *testing.T) {
	o, pool := newOutbox(t)
	enqueue(t, pool, o, msg("poison", "k"), msg("next", "k"))
	rec := &recorder{}
	pub := &panicky{rec: rec}
	pub.panics.Store(2)
	r := o.Relay(pub, outbox.WithBatchSize(1), outbox.WithMaxAttempts(2), outbox.WithBackoff(time.Millisecond, time.Millisecond))
	for attempt := 1; attempt <= 2; attempt++ {
		p := func() (p any) {
			defer func() { p = recover() }()
			_, _ = r.RunOnce(context.Background())
			return nil
		}()
		if _, ok := p.(runtime.Error); !ok {
			t.Fatalf("RunOnce %d panicked with %T %v, want the Publisher's runtime.Error", attempt, p, p)
		}
		checkNothingHeld(t, pool, o)
		if row := rowAttempts(t, pool, o)["poison"]; row.attempts != attempt || !strings.Contains(row.lastErr, "panic") {
			t.Fatalf("after %d panics: %d attempts, last error %q; want %d, the panic", attempt, row.attempts, row.lastErr, attempt)
		}
		time.Sleep(5 * time.Millisecond) // the backoff
	}
	failed, err := o.Failed(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].ID != "poison" {
		t.Fatalf("Failed = %v, want the message the Publisher panicked on", failed)
	}
	drain(t, r)
	checkOnce(t, rec, []string{"next"})
}
