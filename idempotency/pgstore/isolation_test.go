package pgstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestLeaseClaimsUnderStricterIsolation: concurrent claims of one new key
// in lease mode, from a pool whose sessions default to repeatable read or
// serializable. One acquires it; each of the others is answered with the
// entry in the way (the Middleware's 409), not an error: their statement
// met the row the first claim committed after its snapshot, failed with a
// serialization failure, and the Middleware answered 503. Found by a
// review helper.
func TestLeaseClaimsUnderStricterIsolation(t *testing.T) {
	for _, iso := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			pool := newPool(t, func(c *pgxpool.Config) {
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
				c.MaxConns = 8
			})
			s := newStore(t, pool, pgstore.WithoutReplayFastPath())
			ctx := ctxT(t)
			const keys, racers = 40, 4
			var failed atomic.Int64
			var firstErr atomic.Value
			for i := range keys {
				k := idempotency.Key{Scope: "isolation", Key: fmt.Sprint("k", i)}
				var wg sync.WaitGroup
				var acquired atomic.Int64
				start := make(chan struct{})
				for range racers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
						switch {
						case err != nil:
							failed.Add(1)
							firstErr.CompareAndSwap(nil, err)
						case res.Acquired:
							acquired.Add(1)
						}
					}()
				}
				close(start)
				wg.Wait()
				if n := acquired.Load(); n != 1 {
					t.Fatalf("key %q acquired %d times, want once", k.Key, n)
				}
			}
			if n := failed.Load(); n > 0 {
				t.Errorf("%d of %d claims failed, want each answered (the first: %v)", n, keys*racers, firstErr.Load())
			}
		})
	}
}
