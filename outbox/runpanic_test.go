package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// childEnv names the test that a test binary started by inChild runs.
const childEnv = "SAFERETRY_OUTBOX_PANIC_CHILD"

// inChild runs the top-level test t in a test binary of its own and
// reports whether t is the parent, which must return: a panic on one of a
// relay's goroutines that nobody recovers ends the process, and would end
// the whole test binary with it. The child's output is reported when it
// fails or crashes.
func inChild(t *testing.T) (parent bool) {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the test, run in a process of its own, failed (%v):\n%s", err, out)
	}
	return true
}

// runRecovering runs Run as a supervisor would, and returns what it
// panicked with (nil if it returned), or fails tb if it does not end
// within 10 s.
func runRecovering(tb testing.TB, ctx context.Context, r *outbox.Relay) (p any) {
	tb.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		if err := r.Run(ctx); err != nil {
			tb.Errorf("Run = %v", err)
		}
	}()
	select {
	case p = <-done:
		return p
	case <-time.After(10 * time.Second):
		tb.Fatal("Run did not end")
		return nil
	}
}

// relayPool is a pool of maxConns connections on o's table, and the
// Outbox on it.
func relayPool(t *testing.T, o *outbox.Outbox, maxConns int32) (*outbox.Outbox, *pgxpool.Pool) {
	t.Helper()
	pool := testenv.PostgresPool(t, func(c *pgxpool.Config) { c.MaxConns = maxConns })
	table := o.Table()
	return outbox.New(pool, outbox.WithTable(table[1:len(table)-1])), pool
}

// TestRunPublisherPanicGoesUpThroughRun: the Publisher panics (a nil map
// in a broker adapter) on a goroutine of Run's, on a pool of one
// connection per worker (batches one after the other) and of two (the
// next batch claimed while the panicking one is published). The panic
// must not end the process: it goes up through Run, on the caller's
// goroutine, as an error wrapping the value with the stack of Publish, once every worker stopped; nothing stays taken or locked; the
// panicking batch counts a failed attempt (none of it counted published);
// and a healthy relay publishes every message afterwards, each once.
func TestRunPublisherPanicGoesUpThroughRun(t *testing.T) {
	if inChild(t) {
		return
	}
	for _, tc := range []struct {
		name     string
		maxConns int32
	}{{"one connection per worker", 2}, {"pipelined", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := newOutbox(t)
			o, pool := relayPool(t, base, tc.maxConns)
			var ids []string
			for i := range 6 {
				ids = append(ids, fmt.Sprintf("m-%d", i))
				enqueue(t, pool, o, msg(ids[i], fmt.Sprintf("k%d", i)))
			}
			rec := &recorder{}
			pub := &panicky{rec: rec, handed: make(chan []outbox.Message, 1)}
			pub.panics.Store(1)
			opts := []outbox.RelayOption{outbox.WithWorkers(2), outbox.WithBatchSize(2),
				outbox.WithBackoff(50*time.Millisecond, 50*time.Millisecond), outbox.WithPollInterval(50 * time.Millisecond)}

			p := runRecovering(t, context.Background(), o.Relay(pub, opts...))
			// An error wrapping the Publisher's runtime.Error, its text
			// with the stack of Publish.
			err, _ := p.(error)
			var re runtime.Error
			if !errors.As(err, &re) {
				t.Fatalf("Run panicked with %T %v, want an error wrapping the Publisher's runtime.Error", p, p)
			}
			if !strings.Contains(err.Error(), "(*panicky).Publish") {
				t.Errorf("the panic's text has no frame of the Publisher:\n%s", err)
			}
			settled(t, pool, o)
			handed := <-pub.handed
			rows := rowAttempts(t, pool, o)
			for _, m := range handed {
				if r := rows[m.ID]; r.attempts != 1 || !strings.Contains(r.lastErr, "panic") {
					t.Errorf("message %s of the panicking batch: %d attempts, last error %q; want 1, the panic", m.ID, r.attempts, r.lastErr)
				}
			}

			runRelay(t, o.Relay(rec, opts...))
			testenv.Eventually(t, "every message published", func() bool { return rec.count() >= len(ids) })
			time.Sleep(100 * time.Millisecond) // two polls: nothing more
			checkOnce(t, rec, ids)
		})
	}
}

// panickingHandler is a slog.Handler whose Handle panics, as a logging
// backend with a bug would.
type panickingHandler struct{}

func (panickingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (panickingHandler) Handle(context.Context, slog.Record) error {
	panic("logger bug")
}

func (h panickingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h panickingHandler) WithGroup(string) slog.Handler { return h }

// TestRunLoggerPanicGoesUpThroughRun: the relay's logger (WithRelayLogger)
// panics when the relay reports a failed publication, on a worker's
// goroutine (one connection per worker) and on the goroutine that marks a
// batch while the next is published (pipelined). The panic goes up
// through Run as an error with its stack, nothing stays taken or locked, and
// a healthy relay publishes every message not published yet, each once.
func TestRunLoggerPanicGoesUpThroughRun(t *testing.T) {
	if inChild(t) {
		return
	}
	for _, tc := range []struct {
		name     string
		maxConns int32
	}{{"one connection per worker", 1}, {"pipelined", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := newOutbox(t)
			o, pool := relayPool(t, base, tc.maxConns)
			var ids []string
			for i := range 6 {
				ids = append(ids, fmt.Sprintf("m-%d", i))
			}
			for i := 0; i < len(ids); i += 2 {
				enqueue(t, pool, o, msg(ids[i], ""), msg(ids[i+1], ""))
			}
			// The first batch: its first message published, the second
			// failed, which the relay reports.
			first := &recorder{fail: func(call int, msgs []outbox.Message) error {
				if call == 1 {
					return &outbox.PublishError{Index: 1, Err: errors.New("no ack")}
				}
				return nil
			}}
			p := runRecovering(t, context.Background(), o.Relay(first, outbox.WithBatchSize(2), outbox.WithListen(false),
				outbox.WithRelayLogger(slog.New(panickingHandler{}))))
			if err, _ := p.(error); err == nil || !strings.Contains(err.Error(), "logger bug") || !strings.Contains(err.Error(), "panickingHandler.Handle") {
				t.Fatalf("Run panicked with %T %v, want an error of the logger's panic with its stack", p, p)
			}
			settled(t, pool, o)

			// What the first relay did not mark published (with one
			// connection, the first batch's marks were not written when
			// the logger panicked: published again, as after a crash).
			want := unpublished(t, pool, o)
			healthy := &recorder{}
			runRelay(t, o.Relay(healthy, outbox.WithBatchSize(2), outbox.WithPollInterval(50*time.Millisecond),
				outbox.WithBackoff(time.Millisecond, time.Millisecond)))
			testenv.Eventually(t, "every message published", func() bool { return healthy.count() >= len(want) })
			time.Sleep(100 * time.Millisecond) // two polls: nothing more
			checkOnce(t, healthy, want)
			if left := unpublished(t, pool, o); len(left) != 0 {
				t.Errorf("%v not published", left)
			}
		})
	}
}

// unpublished returns the IDs of o's messages not marked published.
func unpublished(t *testing.T, pool *pgxpool.Pool, o *outbox.Outbox) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM `+o.Table()+` WHERE state <> 1 ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// settled waits until nothing of a Run that ended is left: none of pool's
// connections taken, none of o's rows locked. An Acquire that Run's end
// cancelled may leave the pool constructing a connection, counted as
// taken a moment; a statement that it interrupted closes its connection,
// whose locks the server lets go once it sees the connection closed.
func settled(t *testing.T, pool *pgxpool.Pool, o *outbox.Outbox) {
	t.Helper()
	testenv.Eventually(t, "the pool's connections back and the rows unlocked", func() bool {
		if pool.Stat().AcquiredConns() != 0 {
			return false
		}
		err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), `SELECT seq FROM `+o.Table()+` FOR UPDATE NOWAIT`)
			return err
		})
		return err == nil
	})
	checkNothingHeld(t, pool, o)
}
