package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
)

// honouring is a handler that blocks until its request context is done,
// records the cause, and then answers 503 without side effects, as a
// handler that honours its context does.
type honouring struct {
	started chan struct{}
	cause   chan error
	calls   atomic.Int64
}

func newHonouring() *honouring {
	return &honouring{started: make(chan struct{}, 8), cause: make(chan error, 8)}
}

func (h *honouring) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	h.started <- struct{}{}
	select {
	case <-r.Context().Done():
		h.cause <- context.Cause(r.Context())
		w.WriteHeader(http.StatusServiceUnavailable)
	case <-time.After(testenv.Patience):
		h.cause <- nil
		w.WriteHeader(http.StatusCreated)
	}
}

func (h *honouring) wantCause(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.cause:
		if !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Fatalf("the handler's context ended with cause %v, want ErrLeaseLost", err)
		}
		return err
	case <-time.After(2 * testenv.Patience):
		t.Fatal("the handler never returned")
	}
	return nil
}

// TestLeaseLostCancelsTheHandler checks that a renewal that finds the token
// superseded cancels the handler's context with ErrLeaseLost and reports
// lease_lost, and that nothing is completed or released for it.
func TestLeaseLostCancelsTheHandler(t *testing.T) {
	var ev events
	var settles atomic.Int64
	st := &faultyStore{Store: newStore(t),
		renew: func(context.Context, idempotency.Key, int64, time.Duration) error {
			return idempotency.ErrStaleToken
		},
		complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
			settles.Add(1)
			return nil
		},
		release: func(context.Context, idempotency.Key, int64) error { settles.Add(1); return nil },
	}
	app := newHonouring()
	h := idempotency.Middleware(st, idempotency.WithLease(90*time.Millisecond), idempotency.WithHook(ev.hook))(app)
	code := post(h, "k", `{}`).Code
	cause := app.wantCause(t)
	if errors.Is(cause, context.Canceled) {
		t.Fatalf("cause %v also matches context.Canceled", cause)
	}
	if code != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want the handler's own 503", code)
	}
	got := ev.outcomes()
	if len(got) != 1 || got[0] != idempotency.OutcomeLeaseLost {
		t.Fatalf("events %v, want only lease_lost", got)
	}
	if e, _ := ev.find(idempotency.OutcomeLeaseLost); !errors.Is(e.Err, idempotency.ErrLeaseLost) || !errors.Is(e.Err, idempotency.ErrStaleToken) {
		t.Fatalf("lease_lost Err = %v, want ErrLeaseLost and ErrStaleToken", e.Err)
	}
	if n := settles.Load(); n != 0 {
		t.Fatalf("Complete or Release called %d times for a lost claim", n)
	}
}

// TestUnconfirmedLeaseCancelsTheHandler checks that when no renewal is
// acknowledged before the lease could lapse (the store hangs), the handler
// is cancelled with ErrLeaseLost no earlier than the lease's end, and that
// its release still frees the key, since nobody took it over.
func TestUnconfirmedLeaseCancelsTheHandler(t *testing.T) {
	const lease = 300 * time.Millisecond
	var ev events
	var renewals atomic.Int64
	var answering atomic.Bool // set for the retry; a renewal of the first request may still start after it ends
	st := &faultyStore{Store: newStore(t)}
	st.renew = func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
		if answering.Load() {
			return st.Store.Renew(ctx, k, tok, l)
		}
		renewals.Add(1)
		<-ctx.Done() // a store that stopped answering
		return ctx.Err()
	}
	var claimed time.Time
	st.claim = func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
		claimed = time.Now()
		return st.Store.Claim(ctx, k, fp, l, ttl)
	}
	app := newHonouring()
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithHook(ev.hook))(app)
	post(h, "k", `{}`)
	app.wantCause(t)
	if since := time.Since(claimed); since < lease {
		t.Fatalf("handler cancelled %v after the claim, before the %v lease could lapse", since, lease)
	}
	if n := renewals.Load(); n < 2 {
		t.Fatalf("%d renewals sent; a hung one should get a second one beside it", n)
	}
	rel, ok := ev.find(idempotency.OutcomeReleased)
	if !ok || !errors.Is(rel.Err, idempotency.ErrLeaseLost) {
		t.Fatalf("events %v (released Err %v); want released with ErrLeaseLost", ev.outcomes(), rel.Err)
	}
	// Nobody took over, so the release went through: a retry runs at once.
	answering.Store(true)
	if w := post(idempotency.Middleware(st)(&counter{}), "k", `{}`); w.Code != http.StatusCreated {
		t.Fatalf("retry = %d %s, want a new execution", w.Code, w.Body)
	}
}

// TestHandlerNotStartedOnALateClaim checks that a claim whose answer comes
// with less than half of its lease left (a slow store, or a store that says
// so) does not start the handler: the request gets 409 as for a key in
// progress, and once the lease lapses a retry runs the handler.
func TestHandlerNotStartedOnALateClaim(t *testing.T) {
	const lease = 200 * time.Millisecond
	tests := []struct {
		name  string
		claim func(st *faultyStore) func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error)
	}{
		{"slow round trip", func(st *faultyStore) func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
			return func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
				res, err := st.Store.Claim(ctx, k, fp, l, ttl)
				<-time.After(lease * 6 / 10) // the answer takes its time
				return res, err
			}
		}},
		{"store reports little left", func(st *faultyStore) func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
			return func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
				res, err := st.Store.Claim(ctx, k, fp, l, ttl)
				res.LeaseRemaining = l / 4
				return res, err
			}
		}},
		{"store reports lapsed", func(st *faultyStore) func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
			return func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
				res, err := st.Store.Claim(ctx, k, fp, l, ttl)
				res.LeaseRemaining = -time.Millisecond
				return res, err
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev events
			st := &faultyStore{Store: newStore(t)}
			st.claim = tt.claim(st)
			app := &counter{}
			h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithHook(ev.hook))(app)
			wantProblem(t, post(h, "k", `{}`), http.StatusConflict, idempotency.ProblemInProgress)
			if app.calls.Load() != 0 {
				t.Fatal("the handler ran on a claim with under half its lease left")
			}
			if e, ok := ev.find(idempotency.OutcomeInProgress); !ok || e.Err == nil || e.Token == 0 {
				t.Fatalf("events %v (%+v); want in_progress with the claim's token and a reason", ev.outcomes(), e)
			}
			st.claim = nil
			testenv.Eventually(t, "a retry runs once the lease lapsed", func() bool {
				return post(h, "k", `{}`).Code == http.StatusCreated
			})
			if n := app.calls.Load(); n != 1 {
				t.Fatalf("executions = %d, want 1", n)
			}
		})
	}
	t.Run("unknown remaining counts the whole lease", func(t *testing.T) {
		st := &faultyStore{Store: newStore(t)}
		st.claim = func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
			res, err := st.Store.Claim(ctx, k, fp, l, ttl)
			res.LeaseRemaining = 0 // a store that cannot tell
			return res, err
		}
		if w := post(idempotency.Middleware(st, idempotency.WithLease(lease))(&counter{}), "k", `{}`); w.Code != http.StatusCreated {
			t.Fatalf("status = %d, want the handler to run", w.Code)
		}
	})
}

// TestRenewalsGoOnWhileCompleting checks, on fake time, that the lease is
// renewed until Complete is acknowledged, not only while the handler runs:
// a Complete slower than two leases (but within the store timeout) does not
// let a duplicate take the key over.
func TestRenewalsGoOnWhileCompleting(t *testing.T) {
	const lease = 1200 * time.Millisecond // three leases fit in DefaultStoreTimeout
	clk := clock.NewManual(fakeStart)
	base := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
	var completing atomic.Bool
	var renewalsWhileCompleting atomic.Int64
	st := &faultyStore{Store: base}
	st.renew = func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
		if completing.Load() {
			renewalsWhileCompleting.Add(1)
		}
		return base.Renew(ctx, k, tok, l)
	}
	inComplete, finish := make(chan struct{}), make(chan struct{})
	st.complete = func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
		completing.Store(true)
		close(inComplete)
		<-finish // a slow store
		return base.Complete(ctx, k, tok, resp, ttl)
	}
	app := &counter{}
	a := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)
	b := idempotency.Middleware(base, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)
	first := make(chan string)
	go func() { first <- post(a, "k", `{}`).Body.String() }()
	<-inComplete
	for i := int64(1); i <= 9; i++ { // three leases
		clk.Advance(lease / 3)
		testenv.Eventually(t, "the renewal is done", func() bool { return renewalsWhileCompleting.Load() >= i && clk.Pending() > 0 })
		if w := post(b, "k", `{}`); w.Code != http.StatusConflict {
			t.Fatalf("duplicate while the first completes = %d %s, want 409", w.Code, w.Body)
		}
	}
	close(finish)
	body := <-first
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
	if w := post(b, "k", `{}`); w.Body.String() != body {
		t.Fatalf("replay %s, want %s", w.Body, body)
	}
}
