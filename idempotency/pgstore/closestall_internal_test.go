package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestCloseReturnsWhileTheDatabaseStalls checks that Close, called at
// shutdown while the database does not answer (a partition, a failover
// behind an address that still accepts connections), returns within a
// bound rather than wait for the renewal pool: the connections it was
// opening waited for the server's answer for up to pgxpool's minute, and a
// renewal in flight for its own timeout and then up to 15 s for a
// Terminate's answer, so that a process asked to stop went on for a
// minute, past any orchestrator's grace period.
func TestCloseReturnsWhileTheDatabaseStalls(t *testing.T) {
	const bound = 3500 * time.Millisecond
	for _, inFlight := range []bool{false, true} {
		name := "renewal pool opening"
		if inFlight {
			name = "renewal in flight"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			admin := testenv.PostgresPool(t)
			table := testenv.PostgresTable(t, admin, "pgstore_test_")
			pool, proxy := testenv.ProxiedPostgresPool(t)
			s := New(pool, WithTable(table))
			if err := s.CreateSchema(ctx); err != nil {
				t.Fatal(err)
			}
			k := idempotency.Key{Scope: "closestall", Key: "k"}
			res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || !res.Acquired {
				t.Fatalf("Claim = %+v, %v", res, err)
			}
			renewed := make(chan error, 1)
			if inFlight {
				testenv.Eventually(t, "the renewal pool opens its connections", func() bool {
					return s.renewalPool() != pool
				})
				proxy.SetStall(true)
				go func() {
					rctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a long lease's renewal
					defer cancel()
					renewed <- s.Renew(rctx, k, res.Token, time.Minute)
				}()
				time.Sleep(100 * time.Millisecond) // it waits for the database
			} else {
				proxy.SetStall(true)
				// The first renewal makes the renewal pool, whose
				// connections wait for the database; the renewal itself
				// goes to the main pool and times out.
				rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_ = s.Renew(rctx, k, res.Token, time.Minute)
				cancel()
			}
			start := time.Now()
			closed := make(chan struct{})
			go func() { _ = s.Close(); close(closed) }()
			select {
			case <-closed:
				t.Logf("Close returned after %v", time.Since(start).Round(10*time.Millisecond))
			case <-time.After(bound):
				t.Errorf("Close had not returned %v after it was called, the database not answering", bound)
				proxy.SetStall(false)
				<-closed
				t.Logf("Close returned %v after it was called, once the database answered", time.Since(start).Round(10*time.Millisecond))
			}
			if inFlight {
				proxy.SetStall(false)
				<-renewed
			}
		})
	}
}
