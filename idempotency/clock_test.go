package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
)

// These lease tests run on fake time: the Middleware and the memstore read
// one manual clock, and the test moves it.

var fakeStart = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// TestLeaseKeptOnFakeTime holds a handler for three leases of fake time:
// the Middleware renews every third of a lease, duplicates meet 409 all
// along, and the outcome is stored once the handler returns.
func TestLeaseKeptOnFakeTime(t *testing.T) {
	const lease = 10 * time.Second
	clk := clock.NewManual(fakeStart)
	st, renewals := renewCounted(t, clk)
	app, started, release := blockFirst()
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)
	first := make(chan string, 1)
	go func() { first <- post(h, "k", `{}`).Body.String() }()
	<-started
	for i := int64(1); i <= 9; i++ { // three leases
		clk.Advance(lease / 3)
		testenv.Eventually(t, "the renewal is done", func() bool { return renewals.Load() >= i && clk.Pending() > 0 })
		wantProblem(t, post(h, "k", `{}`), http.StatusConflict, idempotency.ProblemInProgress)
	}
	close(release)
	body := <-first
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
	if w := post(h, "k", `{}`); w.Body.String() != body || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay = %d %s, want %s", w.Code, w.Body, body)
	}
}

// renewCounted returns a memstore on clk's time whose renewals it counts.
func renewCounted(t *testing.T, clk *clock.Manual) (*faultyStore, *atomic.Int64) {
	base := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
	renewals := new(atomic.Int64)
	return &faultyStore{Store: base, renew: func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
		renewals.Add(1)
		return base.Renew(ctx, k, tok, l)
	}}, renewals
}

// TestUnconfirmedLeaseOnFakeTime: renewals that never answer leave the
// handler running until its lease could lapse, to the nanosecond of fake
// time, and then its context is cancelled with ErrLeaseLost.
func TestUnconfirmedLeaseOnFakeTime(t *testing.T) {
	const lease = 9 * time.Second
	clk := clock.NewManual(fakeStart)
	base := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
	hang := make(chan struct{})
	defer close(hang)
	st := &faultyStore{Store: base, renew: func(ctx context.Context, _ idempotency.Key, _ int64, _ time.Duration) error {
		select {
		case <-hang:
		case <-ctx.Done():
		}
		return errors.New("no answer")
	}}
	cancelled := make(chan error, 1)
	entered := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		cancelled <- context.Cause(r.Context())
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)
	go post(h, "k", `{}`)
	<-entered
	testenv.Eventually(t, "the lease keeper's timer is armed", func() bool { return clk.Pending() > 0 })
	clk.Advance(lease - time.Nanosecond)
	select {
	case err := <-cancelled:
		t.Fatalf("cancelled (%v) before the lease could lapse", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Advance(time.Nanosecond)
	select {
	case err := <-cancelled:
		if !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the handler was not cancelled when its lease could lapse")
	}
}

// TestHooksCompose checks that every hook given gets every event, in the
// order the hooks were given.
func TestHooksCompose(t *testing.T) {
	var order []string
	var a, b events
	h := idempotency.Middleware(newStore(t),
		idempotency.WithHook(func(ev idempotency.Event) { order = append(order, "a"); a.hook(ev) }),
		idempotency.WithHook(nil),
		idempotency.WithHook(func(ev idempotency.Event) { order = append(order, "b"); b.hook(ev) }),
	)(&counter{})
	post(h, "k", `{}`)
	post(h, "k", `{}`)
	if got := a.outcomes(); len(got) != 2 || got[0] != idempotency.OutcomeNew || got[1] != idempotency.OutcomeReplay {
		t.Fatalf("first hook got %v", got)
	}
	if got := b.outcomes(); len(got) != 2 {
		t.Fatalf("second hook got %v", got)
	}
	if len(order) != 4 || order[0] != "a" || order[1] != "b" {
		t.Fatalf("hooks ran in the order %v, want a, b per event", order)
	}
}

// timerCounter is a clock that counts the timers made with AfterFunc.
type timerCounter struct {
	clock.Clock
	afterFuncs atomic.Int64
}

func (c *timerCounter) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.afterFuncs.Add(1)
	return c.Clock.AfterFunc(d, f)
}

// TestFirstExecutionsShareTimers: requests that settle before their first
// renewal is due start no timer each; their lease keepers wait on timers
// shared by the Middleware's requests (one per shard at most).
func TestFirstExecutionsShareTimers(t *testing.T) {
	clk := &timerCounter{Clock: clock.NewManual(fakeStart)}
	h := idempotency.Middleware(newStore(t), idempotency.WithClock(clk))(&counter{})
	const n = 200
	for i := range n {
		if w := post(h, "key-"+strconv.Itoa(i), `{}`); w.Code != http.StatusCreated {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	if got := clk.afterFuncs.Load(); got > 8 {
		t.Errorf("%d first executions made %d timers with AfterFunc; want at most one per shard (8)", n, got)
	}
}

// TestManyLeasesKeptOnFakeTime holds many handlers at once for two leases
// of fake time: each one's claim is renewed, on the timers its keeper
// waits on first and on its own after, and no duplicate runs.
func TestManyLeasesKeptOnFakeTime(t *testing.T) {
	const (
		lease = 9 * time.Second
		n     = 40
	)
	clk := clock.NewManual(fakeStart)
	st, renewals := renewCounted(t, clk)
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(n)
	app := &counter{before: func(http.ResponseWriter, *http.Request) int {
		entered.Done()
		<-release
		return 0
	}}
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)
	done := make(chan int, n)
	for i := range n {
		go func() { done <- post(h, "key-"+strconv.Itoa(i), `{}`).Code }()
	}
	entered.Wait()
	for round := int64(1); round <= 6; round++ { // two leases
		clk.Advance(lease / 3)
		testenv.Eventually(t, "every claim renewed", func() bool { return renewals.Load() >= round*n })
	}
	for i := range n {
		if w := post(h, "key-"+strconv.Itoa(i), `{}`); w.Code != http.StatusConflict {
			t.Fatalf("duplicate of a held key: %d; want 409", w.Code)
		}
	}
	close(release)
	for range n {
		if code := <-done; code != http.StatusCreated {
			t.Errorf("held request: %d", code)
		}
	}
	if got := app.calls.Load(); got != n {
		t.Errorf("executions = %d; want %d", got, n)
	}
}

// wallClock is a clock.Clock whose Now is a settable wall time without a
// monotonic reading; its timers are the real ones.
type wallClock struct {
	clock.Clock
	now atomic.Pointer[time.Time]
}

func (c *wallClock) Now() time.Time  { return *c.now.Load() }
func (c *wallClock) set(t time.Time) { c.now.Store(&t) }

// TestEventDurationOnAWallClock: an event's Duration is the time from the
// request's admission to the event as the clock tells it, also on a clock
// without monotonic readings whose wall time steps back after the
// Middleware was made, on one that read the zero time then (a fake clock
// not yet set), and on one that read it at a first admission (see
// TestEventDurationAfterAZeroAdmission): an admission counted from such a
// reading overflowed, and Duration came out as 292 years. Found by review
// helpers.
func TestEventDurationOnAWallClock(t *testing.T) {
	for _, c := range []struct {
		name            string
		atMake, atAdmit time.Time
	}{
		{"step back", fakeStart, fakeStart.Add(-time.Hour)},
		{"zero at making", time.Time{}, fakeStart},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &wallClock{Clock: clock.Real}
			clk.set(c.atMake)
			var got []idempotency.Event
			mw := idempotency.Middleware(newStore(t), idempotency.WithClock(clk),
				idempotency.WithHook(func(ev idempotency.Event) { got = append(got, ev) }))(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					clk.set(c.atAdmit.Add(1500 * time.Millisecond))
					w.WriteHeader(http.StatusCreated)
				}))
			clk.set(c.atAdmit)
			post(mw, "k", `{}`)
			if len(got) != 1 || got[0].Outcome != idempotency.OutcomeNew || got[0].Duration != 1500*time.Millisecond {
				t.Errorf("events %v; want one, new, with a Duration of 1.5s", got)
			}
		})
	}
}

// TestEventDurationAfterAZeroAdmission: a request admitted while the clock
// reads the zero time (a fake clock not yet set) has no Duration, as
// before; the requests admitted once the clock is set have theirs.
func TestEventDurationAfterAZeroAdmission(t *testing.T) {
	clk := &wallClock{Clock: clock.Real}
	clk.set(time.Time{})
	var got []idempotency.Event
	var step time.Duration
	mw := idempotency.Middleware(newStore(t), idempotency.WithClock(clk),
		idempotency.WithHook(func(ev idempotency.Event) { got = append(got, ev) }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			clk.set(clk.Now().Add(step))
			w.WriteHeader(http.StatusCreated)
		}))
	post(mw, "first", `{}`)
	if len(got) != 1 || got[0].Duration != 0 {
		t.Errorf("events of the request admitted at the zero time %v; want one, without a Duration", got)
	}
	clk.set(fakeStart)
	step, got = 1500*time.Millisecond, nil
	post(mw, "second", `{}`)
	if len(got) != 1 || got[0].Outcome != idempotency.OutcomeNew || got[0].Duration != 1500*time.Millisecond {
		t.Errorf("events %v; want one, new, with a Duration of 1.5s", got)
	}
}
