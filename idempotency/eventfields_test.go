package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
)

// TestEventCarriesMethodRouteAndDuration: behind a ServeMux route, every
// event names the method and the pattern, and its Duration is the fake
// time the request spent in the Middleware; an answer on admission has
// none.
func TestEventCarriesMethodRouteAndDuration(t *testing.T) {
	clk := clock.NewManual(fakeStart)
	st := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
	var got []idempotency.Event
	mw := idempotency.Middleware(st, idempotency.WithClock(clk), idempotency.WithKeyRequired(true),
		idempotency.WithHook(func(ev idempotency.Event) { got = append(got, ev) }))
	mux := http.NewServeMux()
	mux.Handle("POST /accounts/{id}/payments", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clk.Advance(1500 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	})))
	send := func(key string) {
		r := httptest.NewRequest(http.MethodPost, "/accounts/7/payments", strings.NewReader(`{}`))
		if key != "" {
			r.Header.Set(idempotency.HeaderIdempotencyKey, key)
		}
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	send("k")
	send("k")
	send("")
	want := []struct {
		outcome  idempotency.Outcome
		duration time.Duration
	}{
		{idempotency.OutcomeNew, 1500 * time.Millisecond},
		{idempotency.OutcomeReplay, 0},
		{idempotency.OutcomeMissingKey, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %d", got, len(want))
	}
	for i, w := range want {
		ev := got[i]
		if ev.Outcome != w.outcome || ev.Method != http.MethodPost || ev.Route != "POST /accounts/{id}/payments" || ev.Duration != w.duration {
			t.Errorf("event %d = %s %s %q %v, want %s POST the route %v", i, ev.Outcome, ev.Method, ev.Route, ev.Duration, w.outcome, w.duration)
		}
	}
}

type eventCtxKey struct{}

// TestEventContextIsTheRequests: a hook reaches the request's context
// (its span, its values) through Event.Context, on admission answers and
// after a run alike; an Event the Middleware did not make has Background.
func TestEventContextIsTheRequests(t *testing.T) {
	var got []any
	h := idempotency.Middleware(newStore(t), idempotency.WithKeyRequired(true),
		idempotency.WithHook(func(ev idempotency.Event) { got = append(got, ev.Context().Value(eventCtxKey{})) }))(&counter{})
	for _, key := range []string{"k", ""} {
		r := httptest.NewRequest(http.MethodPost, "/ops", strings.NewReader(`{}`))
		r = r.WithContext(context.WithValue(r.Context(), eventCtxKey{}, "request "+key))
		if key != "" {
			r.Header.Set(idempotency.HeaderIdempotencyKey, key)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if len(got) != 2 || got[0] != "request k" || got[1] != "request " {
		t.Fatalf("contexts seen by the hook carry %v", got)
	}
	if (idempotency.Event{}).Context() == nil {
		t.Fatal("the zero Event has a nil context")
	}
}

// TestEventRepeat: Repeat is set on the events of requests that found
// their key claimed or completed by the same request (a replay), and not
// on those that found it free (a first run, a claim of its own that came
// back too late) or used by another request (a mismatch).
func TestEventRepeat(t *testing.T) {
	var ev events
	late := false
	base := newStore(t)
	st := &faultyStore{Store: base, claim: func(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
		res, err := base.Claim(ctx, k, fp, lease, ttl)
		if late {
			res.LeaseRemaining = time.Nanosecond
		}
		return res, err
	}}
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(&counter{})
	post(h, "k", `{}`)
	post(h, "k", `{}`)
	post(h, "k", `{"a":1}`)
	late = true
	post(h, "k2", `{}`)
	want := []struct {
		outcome idempotency.Outcome
		repeat  bool
	}{
		{idempotency.OutcomeNew, false},
		{idempotency.OutcomeReplay, true},
		{idempotency.OutcomeMismatch, false},
		{idempotency.OutcomeInProgress, false},
	}
	if len(ev.got) != len(want) {
		t.Fatalf("events %v, want %d", ev.outcomes(), len(want))
	}
	for i, w := range want {
		if e := ev.got[i]; e.Outcome != w.outcome || e.Repeat != w.repeat {
			t.Errorf("event %d: %s Repeat %v, want %s Repeat %v", i, e.Outcome, e.Repeat, w.outcome, w.repeat)
		}
	}
}
