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
)

// headerPanicWriter is a ResponseWriter whose Header panics, as a buggy
// writer wrapped around the Middleware's might.
type headerPanicWriter struct{ *httptest.ResponseRecorder }

func (headerPanicWriter) Header() http.Header { panic("writer bug") }

// TestWriterPanicOnReplayGivesOneEvent checks that a replay whose
// ResponseWriter panics as the stored answer is written still gives its
// one event, OutcomeReplay, and the writer's panic goes on as it was: the
// replay's headers used to be set before the event was given, so the
// request gave none.
func TestWriterPanicOnReplayGivesOneEvent(t *testing.T) {
	var ev events
	h := idempotency.Middleware(newStore(t), idempotency.WithHook(ev.hook))(&counter{})
	post(h, "k", `{}`)
	p := func() (p any) {
		defer func() { p = recover() }()
		r := httptest.NewRequest(http.MethodPost, "/ops?b=2&a=1", strings.NewReader(`{}`)) // as post sends it
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderIdempotencyKey, "k")
		h.ServeHTTP(headerPanicWriter{httptest.NewRecorder()}, r)
		return nil
	}()
	if p != "writer bug" {
		t.Fatalf("panic %v went on, want the writer's", p)
	}
	if got := ev.outcomes(); len(got) != 2 || got[1] != idempotency.OutcomeReplay {
		t.Errorf("events %v, want new, then one replay", got)
	}
}

// stopPanicStore finds its key held by the same request on the first
// Claim and completed (201) on the next, and its Watch's stop panics, as
// a store with a bug might.
type stopPanicStore struct {
	*memstore.Store
	claims int
}

func (s *stopPanicStore) Claim(_ context.Context, _ idempotency.Key, fp string, lease, _ time.Duration) (idempotency.ClaimResult, error) {
	s.claims++
	e := idempotency.Entry{State: idempotency.StateInProgress, Fingerprint: fp, Token: 1, LeaseRemaining: lease}
	if s.claims > 1 {
		e.State, e.Response = idempotency.StateCompleted, &idempotency.Response{Status: http.StatusCreated}
	}
	return idempotency.ClaimResult{Entry: e}, nil
}

func (s *stopPanicStore) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	settled, stop, err := s.Store.Watch(ctx, k)
	if err != nil {
		return nil, nil, err
	}
	return settled, func() { stop(); panic("stop bug") }, nil
}

// TestWatchStopPanicDoesNotReplaceHookPanic checks that a request that
// waited for its key (WithWaitForResult) and then replayed goes on with a
// hook's panic on its event, not with the panic of its watch's stop (the
// store's) as the wait is ended after it, which is dropped (and logged),
// as any panic in the cleanup after another.
func TestWatchStopPanicDoesNotReplaceHookPanic(t *testing.T) {
	st := &stopPanicStore{Store: newStore(t)}
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(time.Second),
		idempotency.WithHook(func(idempotency.Event) { panic("hook bug") }))(&counter{})
	if p := postPanicking(h); p != "hook bug" {
		t.Errorf("panic %v went on, want the hook's", p)
	}
	if st.claims != 2 {
		t.Errorf("%d claims, want 2: the request waited and found the key completed", st.claims)
	}
}
