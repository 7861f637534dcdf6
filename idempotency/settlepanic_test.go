package idempotency_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestPanicWhileSettlingStopsRenewals checks, on fake time, that a store
// whose Complete panics does not leave the claim renewed for the life of
// the process: the renewals stop with the request, the lease lapses, and a
// retry runs.
func TestPanicWhileSettlingStopsRenewals(t *testing.T) {
	const lease = 9 * time.Second
	clk := clock.NewManual(fakeStart)
	var renewals atomic.Int64
	var panicking atomic.Bool
	panicking.Store(true)
	inner := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
	st := &faultyStore{Store: inner,
		renew: func(ctx context.Context, k idempotency.Key, token int64, d time.Duration) error {
			renewals.Add(1)
			return inner.Renew(ctx, k, token, d)
		},
		complete: func(ctx context.Context, k idempotency.Key, token int64, r idempotency.Response, ttl time.Duration) error {
			if panicking.Load() {
				panic("store bug")
			}
			return inner.Complete(ctx, k, token, r, ttl)
		},
	}
	entered, release := make(chan struct{}), make(chan struct{})
	app := &counter{}
	app.before = func(http.ResponseWriter, *http.Request) int {
		if app.calls.Load() == 1 {
			close(entered)
			<-release // held until a renewal was made
		}
		return 0
	}
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		post(h, "k", `{}`)
	}()
	<-entered
	clk.Advance(lease / 3)
	testenv.Eventually(t, "a renewal while the handler runs", func() bool { return renewals.Load() > 0 && clk.Pending() > 0 })
	close(release)
	if p := <-recovered; p != "store bug" {
		t.Fatalf("recovered %v, want the store's panic", p)
	}
	if renewals.Load() == 0 {
		t.Fatal("no renewal while the handler ran; the test proves nothing")
	}
	// Nothing of the panicked request is left to renew its claim.
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers still armed after the panicking request; its claim is still renewed", n)
	}
	after := renewals.Load()
	panicking.Store(false)
	// The key is free once the lease lapses, and stays free of renewals.
	clk.Advance(lease)
	testenv.Eventually(t, "a retry runs once the lease lapsed", func() bool {
		return post(h, "k", `{}`).Code == http.StatusCreated
	})
	if n := app.calls.Load(); n != 2 {
		t.Fatalf("executions = %d, want 2 (the retry ran after the panic)", n)
	}
	// The retry's own renewals are the only ones after the panic: at most
	// one per third of a lease while it ran.
	if n := renewals.Load() - after; n > 4 {
		t.Fatalf("%d renewals after the panicking request; its claim is still renewed", n)
	}
}

// TestPanickingHookOnALostLease checks that a hook that panics on
// OutcomeLeaseLost fails only its request: it runs on the request's
// goroutine, where net/http recovers it, never on the renewal's, where a
// panic would end the process. The lease is on fake time: on the wall
// clock, a claim slowed by a loaded machine came back with too little of
// a short lease left and was answered 409 before the handler ran.
func TestPanickingHookOnALostLease(t *testing.T) {
	const lease = 15 * time.Millisecond
	clk := clock.NewManual(fakeStart)
	stale := &faultyStore{Store: newStore(t), renew: func(context.Context, idempotency.Key, int64, time.Duration) error {
		return idempotency.ErrStaleToken
	}}
	hook := func(e idempotency.Event) {
		if e.Outcome == idempotency.OutcomeLeaseLost {
			panic("metrics bug")
		}
	}
	app := newHonouring()
	h := idempotency.Middleware(stale, idempotency.WithClock(clk), idempotency.WithLease(lease), idempotency.WithHook(hook))(app)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError) // the recovered panic's stack
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ops", strings.NewReader(`{}`))
	req.Header.Set(idempotency.HeaderIdempotencyKey, "k")
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		done <- result{resp, err}
	}()
	<-app.started
	testenv.Eventually(t, "the lease keeper's timer", func() bool { return clk.Pending() > 0 })
	clk.Advance(lease) // the renewal finds the claim taken over
	r := <-done
	resp, err := r.resp, r.err
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Fatalf("got %d; want the connection dropped by the hook's panic", resp.StatusCode)
	}
	// Still alive: a panic on a timer goroutine would have ended the test
	// binary before this line.
}
