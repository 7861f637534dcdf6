package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestAnswerInPlaceKeepsOnlyOuterHeaders: when the Middleware answers in
// the place of the handler (409 for a run whose claim was taken over, 503
// for a run abandoned on a lost lease, 503 for a failed commit), the
// answer carries the headers set before the handler ran, as they were,
// and none of the handler's: not a cookie it set (which no retry would
// replay), not a Location, not a value it added to an outer header or
// wrote into one in place (a review helper found a copy that shared the
// values let that through). The lease-mode answers kept the handler's
// headers that are not replayed before (Set-Cookie among them).
func TestAnswerInPlaceKeepsOnlyOuterHeaders(t *testing.T) {
	// handler writes its own headers, then answers as answer says once its
	// context ends (or at once, for the commit).
	handler := func(wait bool, answer func(w http.ResponseWriter)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["X-Outer-Element"][0] = "handler" // a write into an outer value, in place
			h.Set("Set-Cookie", "session=handler")
			h.Set("Location", "/ops/1")
			h.Add("X-Outer", "handler")
			if wait {
				<-r.Context().Done()
			}
			answer(w)
		})
	}
	stale := func(context.Context, idempotency.Key, int64, time.Duration) error { return idempotency.ErrStaleToken }
	cases := []struct {
		name    string
		store   idempotency.Store
		handler http.Handler
		status  int
		problem string
	}{
		{"superseded", &faultyStore{Store: newStore(t), renew: stale},
			handler(true, func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated) }),
			http.StatusConflict, idempotency.ProblemInProgress},
		{"abandoned", &faultyStore{Store: newStore(t), renew: stale},
			handler(true, func(http.ResponseWriter) {}),
			http.StatusServiceUnavailable, idempotency.ProblemStoreUnavailable},
		{"commit failed", &fakeTxStore{Store: newStore(t), commitErr: errors.New("connection lost")},
			handler(false, func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated) }),
			http.StatusServiceUnavailable, idempotency.ProblemCommitFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mw := idempotency.Middleware(c.store, idempotency.WithLease(90*time.Millisecond))(c.handler)
			var after []string
			outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Outer", "outer")
				w.Header().Set("X-Outer-Element", "outer")
				mw.ServeHTTP(w, r)
				after = slices.Clone(w.Header()["X-Outer-Element"])
			})
			w := post(outer, "k", `{}`)
			wantProblem(t, w, c.status, c.problem)
			h := w.Header()
			for _, name := range []string{"X-Outer", "X-Outer-Element"} {
				if got := h.Values(name); !slices.Equal(got, []string{"outer"}) {
					t.Errorf("%s = %q, want the outer handler's value alone", name, got)
				}
			}
			if !slices.Equal(after, []string{"outer"}) {
				t.Errorf("after the Middleware, the outer handler sees X-Outer-Element = %q, want its own value", after)
			}
			if h.Get("Set-Cookie") != "" || h.Get("Location") != "" {
				t.Errorf("the handler's headers went with the Middleware's answer: %v", h)
			}
		})
	}
}
