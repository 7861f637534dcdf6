package idempotency_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// reusedAfterWaitStore finds its key held by the same request on the
// first Claim, and then in progress for a request with another
// fingerprint: the holder let go of the key while the request waited, and
// a different request claimed it first.
type reusedAfterWaitStore struct {
	idempotency.Store
	claims int
}

func (s *reusedAfterWaitStore) Claim(_ context.Context, _ idempotency.Key, fp string, lease, _ time.Duration) (idempotency.ClaimResult, error) {
	s.claims++
	e := idempotency.Entry{State: idempotency.StateInProgress, Fingerprint: fp, Token: 1, LeaseRemaining: lease}
	if s.claims > 1 {
		e.Fingerprint, e.Token = "v1:another request", 2
	}
	return idempotency.ClaimResult{Entry: e}, nil
}

// TestMismatchAfterWaitIsNoRepeat checks that a request that waited for
// its key's holder (WithWaitForResult) and then found the key used by a
// request with another fingerprint gives an OutcomeMismatch that is no
// Repeat, as Event.Repeat says: the Repeat found on the first look stayed
// set for every later event of the request.
func TestMismatchAfterWaitIsNoRepeat(t *testing.T) {
	st := &reusedAfterWaitStore{Store: newStore(t)}
	var ev events
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(time.Second), idempotency.WithHook(ev.hook))(&counter{})
	if w := post(h, "k", `{}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", w.Code)
	}
	if st.claims < 2 {
		t.Fatalf("%d claims: the request did not wait", st.claims)
	}
	got, ok := ev.find(idempotency.OutcomeMismatch)
	if !ok || len(ev.outcomes()) != 1 {
		t.Fatalf("events %v, want one mismatch", ev.outcomes())
	}
	if got.Repeat {
		t.Error("the mismatch is a Repeat; want none: the key was used by another request")
	}
}
