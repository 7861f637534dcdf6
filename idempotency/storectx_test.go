package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/clock"
)

type storeCtxKey struct{}

// TestStoreContextOutlivesTheRequest: in lease mode, the store calls that
// record the outcome run on a context that carries the request's values
// but neither its cancellation (the client left while the handler ran) nor
// its deadline, that contexts derived from it follow, and that is
// cancelled once the claim ends.
func TestStoreContextOutlivesTheRequest(t *testing.T) {
	var got context.Context
	var child context.Context
	st := &faultyStore{Store: newStore(t)}
	st.complete = func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
		got = ctx
		if err := ctx.Err(); err != nil {
			t.Errorf("the store's context has ended: %v", err)
		}
		if v := ctx.Value(storeCtxKey{}); v != "request value" {
			t.Errorf("the store's context carries %v, want the request's value", v)
		}
		if d, ok := ctx.Deadline(); ok {
			t.Errorf("the store's context has the request's deadline %v", d)
		}
		if c := context.Cause(ctx); c != nil {
			t.Errorf("the store's context has the cause %v", c)
		}
		select {
		case <-ctx.Done():
			t.Errorf("the store's context is done")
		default:
		}
		var cancel context.CancelFunc
		child, cancel = context.WithTimeout(ctx, time.Hour)
		_ = cancel // the parent's end must end it
		return st.Store.Complete(ctx, k, tok, resp, ttl)
	}
	rctx, cancel := context.WithTimeout(context.WithValue(context.Background(), storeCtxKey{}, "request value"), time.Hour)
	defer cancel()
	app := &counter{before: func(http.ResponseWriter, *http.Request) int { cancel(); return 0 }} // the client leaves
	h := idempotency.Middleware(st)(app)
	if w := post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(rctx) }); w.Code != http.StatusCreated {
		t.Fatalf("status = %d, want 201", w.Code)
	}
	if got == nil {
		t.Fatal("Complete was not called")
	}
	if err := got.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("once the claim ended, the store's context has Err %v, want context.Canceled", err)
	}
	if c := context.Cause(got); !errors.Is(c, context.Canceled) {
		t.Errorf("once the claim ended, the store's context has the cause %v, want context.Canceled", c)
	}
	select {
	case <-child.Done():
	default:
		t.Error("a context derived from the store's was not cancelled with it")
	}
}

// TestStoreContextEndsAtTheSettleDeadline, on fake time: a store call that
// only polls its context's Err (never asks for Done) sees it end at the
// store timeout, and not before.
func TestStoreContextEndsAtTheSettleDeadline(t *testing.T) {
	const timeout = time.Second
	clk := clock.NewManual(fakeStart)
	entered := make(chan struct{})
	st := &faultyStore{Store: newStore(t), complete: func(ctx context.Context, _ idempotency.Key, _ int64, _ idempotency.Response, _ time.Duration) error {
		if err := ctx.Err(); err != nil {
			t.Errorf("the store's context ended before the timeout: %v", err)
		}
		close(entered)
		for ctx.Err() == nil { // a store that checks between steps
			time.Sleep(time.Millisecond)
		}
		return ctx.Err()
	}}
	var ev events
	h := idempotency.Middleware(st, idempotency.WithClock(clk), idempotency.WithLease(time.Hour),
		idempotency.WithStoreTimeout(timeout), idempotency.WithHook(ev.hook))(&counter{})
	done := make(chan int)
	go func() { done <- post(h, "k", `{}`).Code }()
	<-entered
	clk.Advance(timeout - 1)
	select {
	case <-done:
		t.Fatal("the store call ended before the store timeout")
	case <-time.After(10 * time.Millisecond):
	}
	clk.Advance(1)
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("status = %d, want the handler's 201", code)
	}
	if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || !errors.Is(e.Err, context.Canceled) {
		t.Fatalf("events %v, want store_error with context.Canceled", ev.outcomes())
	}
}
