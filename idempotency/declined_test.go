package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// declining returns st, whose Claim declines every key (a wrapper that
// answers a request of its own without claiming it, as mockserver's does
// for a body it refuses), wrapped as a store that has its own reasons
// would wrap it.
func declining(st idempotency.Store) *faultyStore {
	return &faultyStore{Store: st, claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
		return idempotency.ClaimResult{}, fmt.Errorf("not for this one: %w", idempotency.ErrClaimDeclined)
	}}
}

// TestClaimDeclined: a Claim that declines the key (ErrClaimDeclined) has
// the handler answer the request without a claim, in lease mode and in
// transactional mode, fail closed or open: its answer, a 4xx that a claim
// would store, goes out as it is and is stored nowhere, and its one event
// is OutcomeDeclined with the status sent and no token.
func TestClaimDeclined(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(idempotency.Store) idempotency.Store
		open  bool
	}{
		{"lease", func(st idempotency.Store) idempotency.Store { return st }, false},
		{"lease, fail open", func(st idempotency.Store) idempotency.Store { return st }, true},
		{"tx", func(st idempotency.Store) idempotency.Store { return &fakeTxStore{Store: st} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newStore(t)
			var ev events
			var claimed bool
			h := idempotency.Middleware(tc.store(declining(ms)), idempotency.WithHook(ev.hook), idempotency.WithFailOpen(tc.open))(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, claimed = idempotency.TokenFromContext(r.Context())
					http.Error(w, "refused", http.StatusTeapot)
				}))
			if w := post(h, "declined", `{}`); w.Code != http.StatusTeapot {
				t.Fatalf("answered %d %s, want the handler's 418", w.Code, w.Body)
			}
			if claimed {
				t.Error("the handler ran with a token")
			}
			if _, found, err := ms.Get(context.Background(), idempotency.Key{Key: "declined"}); found || err != nil {
				t.Errorf("the store holds an entry (%v, %v) of a declined claim", found, err)
			}
			if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeDeclined {
				t.Fatalf("events %v, want one %s", got, idempotency.OutcomeDeclined)
			}
			if e, _ := ev.find(idempotency.OutcomeDeclined); e.Status != http.StatusTeapot || e.Token != 0 || e.Err != nil {
				t.Errorf("event status %d, token %d, err %v; want 418, 0, nil", e.Status, e.Token, e.Err)
			}
		})
	}
}

// TestClaimDeclinedPanic: a handler that panics without a claim (its claim
// declined) gives its one event, OutcomeDeclined with ErrHandlerPanicked
// and no status, and its panic goes on.
func TestClaimDeclinedPanic(t *testing.T) {
	var ev events
	h := idempotency.Middleware(declining(newStore(t)), idempotency.WithHook(ev.hook))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler bug") }))
	if p := postPanicking(h); p != "handler bug" {
		t.Errorf("panic %v went on, want the handler's", p)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeDeclined {
		t.Fatalf("events %v, want one %s", got, idempotency.OutcomeDeclined)
	}
	if e, _ := ev.find(idempotency.OutcomeDeclined); e.Status != 0 || !errors.Is(e.Err, idempotency.ErrHandlerPanicked) {
		t.Errorf("event status %d, err %v; want 0, ErrHandlerPanicked", e.Status, e.Err)
	}
}
