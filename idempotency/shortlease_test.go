package idempotency_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
)

// TestShortLeaseRenewedEveryThird: a lease under 3 ms is renewed every
// third of it too, as WithLease says, so that a handler that runs for many
// leases on a store that answers at once keeps its claim. The interval
// was clamped to 1 ms: a 1 ms lease was renewed only when it could lapse,
// and every handler slower than it was cancelled with ErrLeaseLost.
func TestShortLeaseRenewedEveryThird(t *testing.T) {
	for _, lease := range []time.Duration{time.Millisecond, 1200 * time.Microsecond, 2 * time.Millisecond} {
		t.Run(lease.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStore(t, memstore.WithClock(time.Now), memstore.WithCleanupInterval(0))
				var cause error
				app := workingFor(20*lease, &cause)
				h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clock.Real))(app)
				if w := post(h, "k", `{}`); w.Code != http.StatusCreated || cause != nil {
					t.Fatalf("status %d, handler cancelled with %v; want 201 under a lease renewed in time", w.Code, cause)
				}
			})
		})
	}
}
