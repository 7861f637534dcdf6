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
// (Idempotent-Replayed: true) as a success that never happened. Such a run
// now stores nothing when its lease could not be confirmed (lease mode) or
// whatever ended its context (transactional mode, whose rollback undoes
// its writes): its client, if still there, gets 503 ProblemStoreUnavailable
// with Retry-After and without the handler's own headers, and the retry
// runs the handler. Found by a review helper.
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
				w.Header().Set("Location", "/ops/1") // set before it stopped: not sent with the 503
				<-r.Context().Done()                 // stops on its context, with no side effect
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
		first := post(h, "k", `{}`)
		wantProblem(t, first, http.StatusServiceUnavailable, idempotency.ProblemStoreUnavailable)
		if first.Header().Get("Retry-After") == "" || first.Header().Get("Location") != "" {
			t.Errorf("the 503's header %v: want Retry-After, and not the handler's Location", first.Header())
		}
		hang.Store(false)
		w := post(h, "k", `{}`)
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) == "true" || calls.Load() != 2 {
			t.Fatalf("retry answered %d (replayed %q) after %d runs; want the handler run again, 201",
				w.Code, w.Header().Get(idempotency.HeaderReplayed), calls.Load())
		}
	})
	t.Run("client gone, transactional mode", func(t *testing.T) { clientGone(t, &fakeTxStore{Store: newStore(t)}) })
}

// TestImplicitOKAfterClientGoneRunsOnce: in lease mode, a handler whose
// client left while it did its work, and that answered with the implicit
// 200, may well have done the work: its answer is stored, and the retry
// replays it instead of running the work again. (A second review found
// that the first version of TestAbandonedRunStoresNothing's fix ran such a
// handler twice.)
func TestImplicitOKAfterClientGoneRunsOnce(t *testing.T) {
	var effects atomic.Int64
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if effects.Load() == 0 {
			<-r.Context().Done() // the first client left while the work went on
		}
		effects.Add(1) // the work, which does not stop on the context
	}))
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodPost, "/ops?b=2&a=1", strings.NewReader(`{}`)).WithContext(ctx) // as post sends it
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idempotency.HeaderIdempotencyKey, "k")
	time.AfterFunc(20*time.Millisecond, cancel)
	h.ServeHTTP(httptest.NewRecorder(), r)
	w := post(h, "k", `{}`)
	if n := effects.Load(); n != 1 || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("the work ran %d times; the retry answered %d (replayed %q); want once, and the replay",
			n, w.Code, w.Header().Get(idempotency.HeaderReplayed))
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
