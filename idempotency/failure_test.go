package idempotency_test

import (
	"context"
	"errors"
	"github.com/saferetry/saferetry/idempotency"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestStoreFailure(t *testing.T) {
	errDown := errors.New("store down")
	// down is the Middleware with opts over a store whose every Claim fails
	// with errDown, in front of a counter, its events recorded.
	down := func(t *testing.T, opts ...idempotency.Option) (http.Handler, *counter, *events) {
		st := &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
			return idempotency.ClaimResult{}, errDown
		}}
		app, ev := &counter{}, &events{}
		return idempotency.Middleware(st, append(opts, idempotency.WithHook(ev.hook))...)(app), app, ev
	}
	wantDownReported := func(t *testing.T, ev *events) {
		t.Helper()
		if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || !errors.Is(e.Err, errDown) {
			t.Fatalf("events %v", ev.outcomes())
		}
	}
	t.Run("fail closed", func(t *testing.T) {
		h, app, ev := down(t)
		w := post(h, "k", `{}`)
		wantProblem(t, w, http.StatusServiceUnavailable, idempotency.ProblemStoreUnavailable)
		if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
		}
		if app.calls.Load() != 0 {
			t.Fatal("handler ran with the store down")
		}
		wantDownReported(t, ev)
	})
	t.Run("fail open", func(t *testing.T) {
		h, app, ev := down(t, idempotency.WithFailOpen(true))
		if w := post(h, "k", `{"a":1}`); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `{\"a\":1}`) {
			t.Fatalf("fail open: %d %s", w.Code, w.Body)
		}
		if app.calls.Load() != 1 {
			t.Fatal("handler did not run")
		}
		wantDownReported(t, ev)
	})
	t.Run("complete fails: retried, then the response is still sent", func(t *testing.T) {
		app := &counter{}
		var ev events
		var tries atomic.Int64
		st := &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
			tries.Add(1)
			return errDown
		}}
		h := idempotency.Middleware(st, idempotency.WithHook(ev.hook), idempotency.WithStoreTimeout(100*time.Millisecond))(app)
		if w := post(h, "k", `{}`); w.Code != http.StatusCreated {
			t.Fatalf("status = %d, want the handler's 201", w.Code)
		}
		if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || e.Status != http.StatusCreated || !errors.Is(e.Err, errDown) {
			t.Fatalf("events %v", ev.outcomes())
		}
		if n := tries.Load(); n < 3 {
			t.Fatalf("Complete tried %d times within the store timeout, want it retried", n)
		}
	})
	t.Run("fail open does not run the handler for a client that left", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithFailOpen(true))(app)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the claim fails with the request's own context error
		w := post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) })
		if app.calls.Load() != 0 {
			t.Fatalf("the handler ran unprotected (status %d) for a request whose client left", w.Code)
		}
	})
	t.Run("claim cancelled by the client", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) })
		if w.Code != http.StatusServiceUnavailable || app.calls.Load() != 0 {
			t.Fatalf("status %d executions %d; want 503 and no execution", w.Code, app.calls.Load())
		}
	})
}

func TestStoreCallsAfterTheHandlerAreBounded(t *testing.T) {
	var ev events
	st := &faultyStore{Store: newStore(t), complete: func(ctx context.Context, _ idempotency.Key, _ int64, _ idempotency.Response, _ time.Duration) error {
		<-ctx.Done() // a hung store
		return ctx.Err()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	// The client leaves while the handler runs: that does not cut the
	// recording short...
	app := &counter{before: func(http.ResponseWriter, *http.Request) int { cancel(); return 0 }}
	h := idempotency.Middleware(st, idempotency.WithStoreTimeout(20*time.Millisecond), idempotency.WithHook(ev.hook))(app)
	done := make(chan int)
	go func() { done <- post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) }).Code }()
	select {
	case code := <-done: // ...but the timeout does
		if code != http.StatusCreated {
			t.Fatalf("status = %d, want the handler's 201", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hung Complete was not cut short")
	}
	if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || !errors.Is(e.Err, context.Canceled) {
		t.Fatalf("events %v", ev.outcomes())
	}
}
