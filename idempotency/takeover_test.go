package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLeaseLapseTakeover(t *testing.T) {
	st := newStore(t)
	// Instance A cannot renew: it behaves like a frozen process.
	frozen := &faultyStore{Store: st, renew: func(context.Context, idempotency.Key, int64, time.Duration) error { return nil }}
	var evA, evB events
	release := make(chan struct{})
	startedA := make(chan int64, 1)
	var tokens sync.Map
	app := &counter{}
	app.before = func(_ http.ResponseWriter, r *http.Request) int {
		tok, ok := idempotency.TokenFromContext(r.Context())
		if !ok {
			t.Errorf("no token in the handler's context")
		}
		tokens.Store(app.calls.Load(), tok)
		if app.calls.Load() == 1 {
			startedA <- tok
			<-release
		}
		return 0
	}
	a := idempotency.Middleware(frozen, idempotency.WithLease(50*time.Millisecond), idempotency.WithHook(evA.hook))(app)
	b := idempotency.Middleware(st, idempotency.WithLease(50*time.Millisecond), idempotency.WithHook(evB.hook))(app)

	aDone := make(chan *httptest.ResponseRecorder)
	go func() { aDone <- post(a, "op", `{}`) }()
	tokA := <-startedA

	var bBody string
	testenv.Eventually(t, "B takes over", func() bool {
		w := post(b, "op", `{}`)
		if w.Code == http.StatusCreated {
			bBody = w.Body.String()
			return true
		}
		if w.Code != http.StatusConflict {
			t.Fatalf("B got %d %s while A's lease was alive or lapsing", w.Code, w.Body)
		}
		return false
	})
	if ev, ok := evB.find(idempotency.OutcomeNew); !ok || !ev.TookOver || ev.Token <= tokA {
		t.Fatalf("B's event = %+v (found %v); want a takeover with a token above %d", ev, ok, tokA)
	}
	close(release)
	// A's own 201 differs from the record (B's): A's client gets 409 in
	// progress instead, never an answer that no repeat would give.
	wa := <-aDone
	wantProblem(t, wa, http.StatusConflict, idempotency.ProblemInProgress)
	if ra := wa.Header().Get("Retry-After"); ra != "1" {
		t.Fatalf("A's 409 has Retry-After %q, want 1", ra)
	}
	if loc := wa.Header().Get("Location"); loc != "" {
		t.Fatalf("A's 409 carries the handler's Location %q", loc)
	}
	if ev, ok := evA.find(idempotency.OutcomeLeaseLost); !ok || !errors.Is(ev.Err, idempotency.ErrStaleToken) || ev.Status != http.StatusConflict {
		t.Fatalf("A's events %v; want lease_lost with ErrStaleToken and status 409", evA.outcomes())
	}
	if _, ok := evA.find(idempotency.OutcomeNew); ok {
		t.Fatalf("A's stale completion was reported as stored")
	}
	// The record is B's: A's late completion did not overwrite it.
	w := post(a, "op", `{}`)
	if w.Body.String() != bBody || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay = %s, want B's %s", w.Body, bBody)
	}
	if n := app.calls.Load(); n != 2 {
		t.Fatalf("executions = %d, want 2", n)
	}
}

func TestLeaseLostDetectedByRenewal(t *testing.T) {
	st := newStore(t)
	var ev events
	release := make(chan struct{})
	started := make(chan struct{})
	var cause error
	var returned atomic.Bool
	cancelled := make(chan struct{})
	app := &counter{before: func(_ http.ResponseWriter, r *http.Request) int {
		close(started)
		<-r.Context().Done() // the renewal finds the claim taken over
		cause = context.Cause(r.Context())
		close(cancelled)
		<-release
		returned.Store(true)
		return 0 // a handler that ignores the loss answers 201
	}}
	stale := &faultyStore{Store: st, renew: func(context.Context, idempotency.Key, int64, time.Duration) error {
		return fmt.Errorf("renew: %w", idempotency.ErrStaleToken)
	}}
	// Hooks run user code: none runs on the renewal's goroutine, so the
	// loss is reported once the handler returned.
	early := make(chan idempotency.Outcome, 1)
	hook := func(e idempotency.Event) {
		if !returned.Load() {
			early <- e.Outcome
		}
		ev.hook(e)
	}
	const lease = 9 * time.Second
	clk := clock.NewManual(fakeStart)
	h := idempotency.Middleware(stale, idempotency.WithLease(lease), idempotency.WithClock(clk), idempotency.WithHook(hook))(app)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(h, "k", `{}`) }()
	<-started
	clk.Advance(lease / 3) // the first renewal is due
	<-cancelled
	close(release)
	w := <-done
	if !errors.Is(cause, idempotency.ErrLeaseLost) {
		t.Fatalf("handler's cause = %v, want ErrLeaseLost", cause)
	}
	wantProblem(t, w, http.StatusConflict, idempotency.ProblemInProgress) // in place of the superseded 201
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeLeaseLost {
		t.Fatalf("events = %v, want only lease_lost", got)
	}
	select {
	case o := <-early:
		t.Fatalf("%s reported while the handler still ran", o)
	default:
	}
}

func TestLoggerReportsLostLease(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
	st := &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
		return idempotency.ErrStaleToken
	}}
	h := idempotency.Middleware(st, idempotency.WithLogger(logger))(&counter{})
	post(h, "k", `{}`)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "lease lost") || !strings.Contains(buf.String(), "key=k") {
		t.Fatalf("log = %q", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestLeaseRenewalRetriesWithinTheLease checks that a renewal that failed
// (here: hung until its timeout) is retried before the lease lapses, not a
// whole renewal interval later, when another instance could take over.
func TestLeaseRenewalRetriesWithinTheLease(t *testing.T) {
	const lease = 900 * time.Millisecond // renewals every 300 ms
	var calls atomic.Int64
	retried := make(chan time.Time, 1)
	st := &faultyStore{Store: newStore(t), renew: func(ctx context.Context, k idempotency.Key, tok int64, d time.Duration) error {
		switch calls.Add(1) {
		case 1:
			<-ctx.Done() // a store that stopped answering, once
			return ctx.Err()
		case 2:
			retried <- time.Now()
		}
		return nil
	}}
	var claimed time.Time // written before the handler runs, read in it
	st.claim = func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
		claimed = time.Now()
		return st.Store.Claim(ctx, k, fp, l, ttl)
	}
	done := make(chan struct{})
	app := &counter{before: func(http.ResponseWriter, *http.Request) int {
		select {
		case at := <-retried:
			if since := at.Sub(claimed); since >= lease {
				t.Errorf("the renewal was retried %v after the claim, when the %v lease had lapsed", since, lease)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("the failed renewal was never retried")
		}
		close(done)
		return 0
	}}
	h := idempotency.Middleware(st, idempotency.WithLease(lease))(app)
	if w := post(h, "k", `{}`); w.Code != http.StatusCreated {
		t.Fatalf("status = %d", w.Code)
	}
	<-done
}

// TestTTLShorterThanHandler checks that a TTL shorter than the handler's run
// does not free the key while the handler still holds it: the claim lives at
// least one lease, and renewals keep it, so a duplicate meets 409.
func TestTTLShorterThanHandler(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	st := newStore(t, memstore.WithClock(clock))

	app, started, release := blockFirst()
	h := idempotency.Middleware(st, idempotency.WithTTL(100*time.Millisecond), idempotency.WithLease(time.Minute))(app)

	first := make(chan int)
	go func() { first <- post(h, "slow", `{}`).Code }()
	<-started
	advance(time.Second) // ten TTLs pass while the handler runs
	if w := post(h, "slow", `{}`); w.Code != http.StatusConflict {
		t.Errorf("duplicate while the handler runs past the TTL = %d %s, want 409", w.Code, w.Body)
	}
	close(release)
	if code := <-first; code != http.StatusCreated {
		t.Fatalf("first request = %d, want 201", code)
	}
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// TestLeaseRenewedOnAClockFarBeforeTheMiddlewaresMaking, on fake time: a
// keeper renews its lease whatever the clock read when the Middleware was
// made, even more than an int64 of nanoseconds (292 years) before it,
// where the keepers' shared queue counts its wake times from that reading.
func TestLeaseRenewedOnAClockFarBeforeTheMiddlewaresMaking(t *testing.T) {
	const lease = 9 * time.Second
	clk := clock.NewManual(fakeStart)
	renewed := make(chan struct{}, 1)
	st := &faultyStore{Store: newStore(t), renew: func(context.Context, idempotency.Key, int64, time.Duration) error {
		select {
		case renewed <- struct{}{}:
		default:
		}
		return nil
	}}
	release := make(chan struct{})
	started := make(chan struct{})
	app := &counter{before: func(http.ResponseWriter, *http.Request) int {
		close(started)
		<-release
		return 0
	}}
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)
	for range 2 {
		clk.Advance(-200 * 365 * 24 * time.Hour) // 400 years back in all
	}
	done := make(chan int)
	go func() { done <- post(h, "k", `{}`).Code }()
	<-started
	clk.Advance(lease / 3) // the first renewal is due
	select {
	case <-renewed:
	case <-time.After(5 * time.Second): // only when it fails
		t.Error("no renewal was sent a third of a lease after the claim")
	}
	close(release)
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("status = %d, want 201", code)
	}
}
