package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
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

// TestPipelinedWorkersShareASmallPool: two Runs of a Relay (as many
// relays in one process) whose pool has two connections, so that each of
// their workers pipelines: when both ask for their connections at once,
// each gets one; neither may then wait for ever for its second.
func TestPipelinedWorkersShareASmallPool(t *testing.T) {
	o, _ := newOutbox(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	small, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(small.Close)
	// The same table, through the small pool.
	table := strings.Trim(o.Table(), `"`)
	os := outbox.New(small, outbox.WithTable(table))
	// Both connections held, so that both workers wait in Acquire, then
	// get one each when they are given back.
	var held []*pgxpool.Conn
	for range 2 {
		c, err := small.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	rec := &recorder{}
	r := os.Relay(rec, outbox.WithListen(false), outbox.WithPollInterval(5*time.Millisecond), outbox.WithRetention(-1, 0, 0))
	runRelay(t, r)
	runRelay(t, r)
	time.Sleep(50 * time.Millisecond) // let both workers reach Acquire
	for _, c := range held {
		c.Release()
	}
	pool := testenv.PostgresPool(t)
	enqueue(t, pool, o, msg("m", "k"))
	testenv.Eventually(t, "the message is published", func() bool { return rec.count() == 1 })
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
