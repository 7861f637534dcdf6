package pgstore

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestRenewRacingCloseSucceeds checks Close's promise that the Store stays
// usable, renewals going to the main pool from then on, for the renewals
// in flight when Close comes: one that took the renewal pool just before
// Close closed it failed with "closed pool" though the database answered,
// a failed renewal that the Middleware logs, retries, and counts toward a
// lease lost (a reload that closes the Store while its requests drain).
func TestRenewRacingCloseSucceeds(t *testing.T) {
	pool := testenv.PostgresPool(t)
	ctx := context.Background()
	const lease = 5 * time.Second
	for round := range 5 {
		s := New(pool, WithTable(testenv.PostgresTable(t, pool, "pgstore_test_")))
		if err := s.CreateSchema(ctx); err != nil {
			t.Fatal(err)
		}
		keys := make([]idempotency.Key, 8)
		tokens := make([]int64, len(keys))
		for i := range keys {
			keys[i] = idempotency.Key{Scope: "closerenew", Key: strconv.Itoa(i)}
			res, err := s.Claim(ctx, keys[i], "fp", lease, time.Minute)
			if err != nil || !res.Acquired {
				t.Fatalf("Claim = %+v, %v", res, err)
			}
			tokens[i] = res.Token
		}
		testenv.Eventually(t, "the renewal pool opens its connections", func() bool {
			return s.renewalPool() != pool
		})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := s.Renew(ctx, keys[i], tokens[i], lease); err != nil {
						t.Errorf("round %d: Renew while Close ran = %v, want nil: the database answers", round, err)
						return
					}
				}
			}()
		}
		time.Sleep(20 * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
	}
}
