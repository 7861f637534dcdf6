package mockserver_test

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// lowTokenStore is a Store whose fencing tokens start at math.MinInt64:
// its memstore's, shifted down by a constant, which the Store contract
// allows (tokens only have to grow).
type lowTokenStore struct{ idempotency.Store }

// tokenShift is added to memstore's tokens, wrapping: its first, 1,
// becomes math.MinInt64.
var tokenShift int64 = math.MaxInt64

func (s lowTokenStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	if res.Acquired {
		res.Token += tokenShift
	} else {
		res.Entry.Token += tokenShift
	}
	return res, err
}

func (s lowTokenStore) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	return s.Store.Renew(ctx, k, token-tokenShift, lease)
}

func (s lowTokenStore) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	return s.Store.Complete(ctx, k, token-tokenShift, resp, ttl)
}

func (s lowTokenStore) Release(ctx context.Context, k idempotency.Key, token int64) error {
	return s.Store.Release(ctx, k, token-tokenShift)
}

// TestPaymentReleasedUnderLowestToken: a payment's claim whose store
// issued it the token math.MinInt64 is released when its answer is not
// stored (a 503), so its retry runs: refusalGuard took every claim with
// that token for the claim it gives a refused request, which holds
// nothing, and dropped its Release, leaving the key in progress until its
// lease lapsed, every retry meanwhile answered 409.
func TestPaymentReleasedUnderLowestToken(t *testing.T) {
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	var failed atomic.Bool
	srv := mockserver.New(mockserver.WithStore(lowTokenStore{ms}), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tok, _ := idempotency.TokenFromContext(r.Context()); tok == math.MinInt64 && failed.CompareAndSwap(false, true) {
				http.Error(w, "down for a moment", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	defer srv.Close()
	if _, resp, b := sendTyped(t, srv, "lowest", []string{"application/json"}, payBody); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first attempt: %d %s, want the injected 503", resp.StatusCode, b)
	}
	if !failed.Load() {
		t.Fatal("the first claim's token was not math.MinInt64")
	}
	if _, resp, b := sendTyped(t, srv, "lowest", []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated {
		t.Errorf("retry after a 503 that is not stored: %d %s, want 201", resp.StatusCode, b)
	}
}
