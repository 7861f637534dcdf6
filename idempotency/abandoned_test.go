package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestAbandonedRunStoresNothing: a handler that stops on its context, as
// the package documentation asks, and so writes nothing, left net/http's
// implicit 200 to be stored, and every retry was answered with it
// (Idempotent-Replayed: true) as a success that never happened. A run that
// wrote nothing after its context ended now stores nothing: its client, if
// still there, gets 503 ProblemStoreUnavailable with Retry-After, and the
// retry runs the handler. Both ways the context ends are covered: the
// lease not confirmed in time (the store stopped answering renewals), and
// the client gone. Found by a review helper.
func TestAbandonedRunStoresNothing(t *testing.T) {
	t.Run("lease not confirmed", func(t *testing.T) {
		var hang atomic.Bool
		hang.Store(true)
		st := &faultyStore{Store: newStore(t)}
		st.renew = func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
			if hang.Load() {
				<-ctx.Done() // the store stopped answering for a while
				return ctx.Err()
			}
			return st.Store.Renew(ctx, k, tok, l)
		}
		var calls atomic.Int64
		h := idempotency.Middleware(st, idempotency.WithLease(150*time.Millisecond))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				<-r.Context().Done() // stops on its context, with no side effect
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
		first := post(h, "k", `{}`)
		wantProblem(t, first, http.StatusServiceUnavailable, idempotency.ProblemStoreUnavailable)
		if first.Header().Get("Retry-After") == "" {
			t.Error("the 503 has no Retry-After")
		}
		hang.Store(false)
		w := post(h, "k", `{}`)
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) == "true" || calls.Load() != 2 {
			t.Fatalf("retry answered %d (replayed %q) after %d runs; want the handler run again, 201",
				w.Code, w.Header().Get(idempotency.HeaderReplayed), calls.Load())
		}
	})
	for name, st := range map[string]idempotency.Store{"client gone": newStore(t), "client gone, transactional mode": &fakeTxStore{Store: newStore(t)}} {
		t.Run(name, func(t *testing.T) { clientGone(t, st) })
	}
}

func clientGone(t *testing.T, st idempotency.Store) {
	var calls atomic.Int64
	h := idempotency.Middleware(st)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodPost, "/ops?b=2&a=1", strings.NewReader(`{}`)).WithContext(ctx) // as post sends it
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idempotency.HeaderIdempotencyKey, "k")
	time.AfterFunc(20*time.Millisecond, cancel) // the client goes away
	h.ServeHTTP(httptest.NewRecorder(), r)
	w := post(h, "k", `{}`)
	if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) == "true" || calls.Load() != 2 {
		t.Fatalf("retry answered %d (replayed %q) after %d runs; want the handler run again, 201",
			w.Code, w.Header().Get(idempotency.HeaderReplayed), calls.Load())
	}
}
