package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestMain checks the test database once before any test runs; see
// testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Postgres) }

// newOutbox returns an Outbox on a table of the test's own, its schema
// created.
func newOutbox(t *testing.T) (*outbox.Outbox, *pgxpool.Pool) {
	t.Helper()
	pool := testenv.PostgresPool(t)
	o := outbox.New(pool, outbox.WithTable(testenv.PostgresTable(t, pool, "outbox_test_")))
	if err := o.CreateSchema(context.Background()); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	return o, pool
}

// enqueue commits msgs in a transaction of their own.
func enqueue(t *testing.T, pool *pgxpool.Pool, o *outbox.Outbox, msgs ...outbox.Message) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		return o.Enqueue(context.Background(), tx, msgs...)
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

// recorder is a Publisher that records what it is handed, checks that no
// message is held by two Publish calls at once, and fails when fail says so.
type recorder struct {
	mu       sync.Mutex
	got      []outbox.Message
	inFlight map[string]bool
	calls    int
	overlaps []string
	fail     func(call int, msgs []outbox.Message) error // nil: never
}

func (r *recorder) Publish(ctx context.Context, msgs []outbox.Message) error {
	return r.publishWith(msgs, func() {})
}

// publishWith is Publish, calling during while msgs are in flight.
func (r *recorder) publishWith(msgs []outbox.Message, during func()) error {
	r.mu.Lock()
	r.calls++
	call := r.calls
	if r.inFlight == nil {
		r.inFlight = map[string]bool{}
	}
	for _, m := range msgs {
		if r.inFlight[m.ID] {
			r.overlaps = append(r.overlaps, m.ID)
		}
		r.inFlight[m.ID] = true
	}
	r.mu.Unlock()
	during()
	var err error
	if r.fail != nil {
		err = r.fail(call, msgs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range msgs {
		delete(r.inFlight, m.ID)
		if err == nil || publishedBefore(err, i) {
			r.got = append(r.got, m)
		}
	}
	return err
}

// publishedBefore reports whether message i counts as published under err.
func publishedBefore(err error, i int) bool {
	pe, ok := err.(*outbox.PublishError)
	return ok && i < pe.Index
}

func (r *recorder) messages() []outbox.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// drain calls RunOnce until a call hands nothing over.
func drain(t *testing.T, r *outbox.Relay) {
	t.Helper()
	for {
		n, err := r.RunOnce(context.Background())
		if err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

// runRelay runs r in the background until the test ends.
func runRelay(t *testing.T, r *outbox.Relay) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil after cancel", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
}

func msg(id, key string) outbox.Message {
	return outbox.Message{ID: id, Topic: "test.event", Key: key, Payload: []byte(fmt.Sprintf(`{"id":%q}`, id))}
}

// gated is a Publisher whose first call waits, once entered, until open
// is closed; then it hands over to rec.
type gated struct {
	rec     *recorder
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *gated) Publish(ctx context.Context, msgs []outbox.Message) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		// rec sees the batch in flight while it waits.
		return g.rec.publishWith(msgs, func() { close(g.entered); <-g.open })
	}
	return g.rec.Publish(ctx, msgs)
}

// call is a function running in a goroutine of its own.
type call struct {
	ch  chan error
	err error
	got bool
}

func start(f func() error) *call {
	c := &call{ch: make(chan error, 1)}
	go func() { c.ch <- f() }()
	return c
}

// done reports whether the function returned.
func (c *call) done() bool {
	if !c.got {
		select {
		case c.err = <-c.ch:
			c.got = true
		default:
		}
	}
	return c.got
}

// wait returns the function's error once it returned.
func (c *call) wait() error {
	if !c.got {
		c.err, c.got = <-c.ch, true
	}
	return c.err
}
