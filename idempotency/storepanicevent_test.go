package idempotency_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestStorePanicWhileSettlingGivesOneEvent checks that a request whose
// store panics while its outcome is recorded (Complete, or the Release
// after a 5xx or a handler's panic) still gives its one event, as
// transactional mode does: OutcomeStoreError, with no status, since
// nothing was sent. Without it, metrics fed by the hook miss the request.
func TestStorePanicWhileSettlingGivesOneEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int  // the handler's
		panics bool // the handler panics too
	}{
		{"complete", http.StatusCreated, false},
		{"release after a 5xx", http.StatusBadGateway, false},
		{"release after a handler panic", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &faultyStore{Store: newStore(t),
				complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
					panic("store bug")
				},
				release: func(context.Context, idempotency.Key, int64) error { panic("store bug") },
			}
			var mu sync.Mutex
			var events []idempotency.Event
			hook := func(e idempotency.Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			}
			h := idempotency.Middleware(st, idempotency.WithHook(hook))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.panics {
					panic("handler bug")
				}
				w.WriteHeader(tc.status)
			}))
			func() {
				defer func() { _ = recover() }()
				post(h, "k", `{}`)
			}()
			mu.Lock()
			defer mu.Unlock()
			if len(events) != 1 {
				t.Fatalf("%d events %v, want 1", len(events), events)
			}
			if e := events[0]; e.Outcome != idempotency.OutcomeStoreError || e.Status != 0 || e.Err == nil {
				t.Errorf("event %s status %d err %v, want %s, no status, an error", e.Outcome, e.Status, e.Err, idempotency.OutcomeStoreError)
			}
		})
	}
}

// TestTxStorePanicEventHasNoStatus checks that the OutcomeStoreError event
// of a transactional request whose Commit panicked carries no status:
// nothing of the buffered response was sent (Event.Status).
func TestTxStorePanicEventHasNoStatus(t *testing.T) {
	st := &fakeTxStore{Store: newStore(t), panicCommit: true}
	var events []idempotency.Event
	mw := idempotency.Middleware(st, idempotency.WithHook(func(e idempotency.Event) { events = append(events, e) }))(&counter{})
	func() {
		defer func() { _ = recover() }()
		post(mw, "k", `{}`)
	}()
	if len(events) != 1 {
		t.Fatalf("%d events %v, want 1", len(events), events)
	}
	if e := events[0]; e.Outcome != idempotency.OutcomeStoreError || e.Status != 0 {
		t.Errorf("event %s status %d, want %s with no status (nothing was sent)", e.Outcome, e.Status, idempotency.OutcomeStoreError)
	}
}
