package idempotency

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unsafe"
)

// TestRequestSizes guards the fast path's allocations. Every protected
// request allocates its state (request); one that runs its handler in
// lease mode also allocates its claim (leaseClaim), and a replay, a 409 or
// a 422 does not. Each fits a 256-byte Go size class: a field more spills
// it into the 288-byte class on every request.
func TestRequestSizes(t *testing.T) {
	for _, c := range []struct {
		name string
		size uintptr
	}{
		{"request", unsafe.Sizeof(request{})},
		{"leaseClaim", unsafe.Sizeof(leaseClaim{})},
	} {
		if c.size > 256 {
			t.Errorf("%s is %d bytes, over 256", c.name, c.size)
		}
	}
}

// answerStore is a Store whose Claim gives one answer; it has no other
// method a test of a claim needs.
type answerStore struct {
	Store
	res ClaimResult
	err error
}

func (s *answerStore) Claim(context.Context, Key, string, time.Duration, time.Duration) (ClaimResult, error) {
	return s.res, s.err
}

// Lease mode makes its hold of a claim (leaseClaim) only for a claim it
// acquired: a replay, a 409, a 422 or a store error allocates nothing for
// it, which TestReplayAllocations sees from outside.
func TestLeaseClaimOnlyWhenAcquired(t *testing.T) {
	for _, tt := range []struct {
		name string
		res  ClaimResult
		err  error
		held bool
	}{
		{"acquired", ClaimResult{Acquired: true, Token: 7}, nil, true},
		{"completed", ClaimResult{Entry: Entry{State: StateCompleted, Fingerprint: "fp", Response: &Response{Status: 201}}}, nil, false},
		{"in progress", ClaimResult{Entry: Entry{State: StateInProgress, Fingerprint: "fp"}}, nil, false},
		{"store error", ClaimResult{}, errors.New("store down"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := &answerStore{res: tt.res, err: tt.err}
			m := Middleware(store)(http.NotFoundHandler()).(*middleware)
			q := &request{m: m, r: httptest.NewRequest(http.MethodPost, "/payments", nil), fp: "fp"}
			q.claim.key = Key{Key: "k"}
			h, res, err := m.mode.claim(q)
			if err != tt.err || res.Acquired != tt.res.Acquired {
				t.Fatalf("claim = %+v, %v; want the store's %+v, %v", res, err, tt.res, tt.err)
			}
			if !tt.held {
				if h != nil {
					t.Fatalf("held %T for a claim not acquired", h)
				}
				if n := testing.AllocsPerRun(100, func() { _, _, _ = m.mode.claim(q) }); n != 0 {
					t.Errorf("a claim not acquired allocates %.0f times, want 0", n)
				}
				return
			}
			c, ok := h.(*leaseClaim)
			if !ok || c.keeper.base.IsZero() {
				t.Fatalf("held %#v, want a *leaseClaim with the time the claim was sent", h)
			}
			if h2, _, _ := m.mode.claim(q); h2 == h {
				t.Error("two acquired claims share one leaseClaim")
			}
		})
	}
}
