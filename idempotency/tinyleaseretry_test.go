package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
)

// TestFailingRenewalOfATinyLeaseDoesNotSpin: a renewal of a lease under
// 30 ns that fails with a nanosecond or two of the lease left is retried a
// nanosecond later at the soonest, not at once: the delay, a third of what
// is left but at least a tenth of the interval, came to 0, and the keeper
// renewed without end while no time passed (a fake clock, a synctest
// bubble), so the request never ended.
func TestFailingRenewalOfATinyLeaseDoesNotSpin(t *testing.T) {
	for _, lease := range []time.Duration{5, 10, 29} {
		t.Run(lease.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := newStore(t, memstore.WithClock(time.Now), memstore.WithCleanupInterval(0))
				const most = 10000
				var renews atomic.Int64
				st := &faultyStore{Store: base, renew: func(context.Context, idempotency.Key, int64, time.Duration) error {
					if renews.Add(1) > most {
						return idempotency.ErrStaleToken // ends the renewals, so that the test ends
					}
					return errBlip
				}}
				var cause error
				app := workingFor(100*lease, &cause)
				h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clock.Real))(app)
				post(h, "k", `{}`)
				if n := renews.Load(); n > most {
					t.Fatalf("over %d renewals with no time passing: the keeper spins (handler cancelled with %v)", most, cause)
				}
				if !errors.Is(cause, idempotency.ErrLeaseLost) {
					t.Fatalf("handler cancelled with %v, want ErrLeaseLost once the lease could lapse", cause)
				}
			})
		})
	}
}
