package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// lockRows opens a transaction on admin that locks the rows of keys in
// table, and returns the function that ends it.
func lockRows(t *testing.T, admin *pgxpool.Pool, table string, keys ...idempotency.Key) func() {
	t.Helper()
	ctx := context.Background()
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM `+pgx.Identifier{table}.Sanitize()+` WHERE scope = $1 AND key = $2 FOR UPDATE`, k.Scope, k.Key).Scan(&one)
		if err != nil {
			_ = tx.Rollback(ctx)
			t.Fatalf("lock %v: %v", k, err)
		}
	}
	return func() { _ = tx.Rollback(ctx) }
}

// lapsedClaims claims n new keys in s with a lease of a millisecond and
// returns them once their leases have lapsed: a claim of one then takes
// it over, which locks its row.
func lapsedClaims(t *testing.T, s *pgstore.Store, n int) []idempotency.Key {
	t.Helper()
	keys := make([]idempotency.Key, n)
	for i := range keys {
		keys[i] = idempotency.Key{Scope: "gate", Key: testenv.RandomName("lapsed")}
		if r, err := s.Claim(context.Background(), keys[i], "fp", time.Millisecond, time.Hour); err != nil || !r.Acquired {
			t.Fatalf("Claim = %+v, %v", r, err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the leases' millisecond, on the database's clock
	return keys
}

// TestRequestPathUsesTheWholePool checks that claims may hold every
// connection of the Store's pool while no completion needs one (the gate
// kept a quarter idle for completions before).
func TestRequestPathUsesTheWholePool(t *testing.T) {
	admin := newPool(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 2 })
	s := pgstore.New(pool, pgstore.WithTable(uniqueTable(t, admin)))
	defer s.Close()
	if err := s.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys := lapsedClaims(t, s, 2)
	unlock := lockRows(t, admin, s.Table(), keys...)
	defer unlock()
	done := make(chan error, len(keys))
	for _, k := range keys {
		go func() {
			r, err := s.Claim(context.Background(), k, "fp", 10*time.Second, time.Hour)
			if err == nil && !r.Acquired {
				err = fmt.Errorf("the takeover answered %+v", r)
			}
			done <- err
		}()
	}
	testenv.Eventually(t, "both takeovers hold a connection of the pool of 2", func() bool {
		return pool.Stat().AcquiredConns() == 2
	})
	unlock()
	for range keys {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompletionWaitsForOneClaimAtMost checks that a burst of claims
// holding the whole pool does not starve a completion: when one claim
// gives its connection back, the completion gets it, though more claims
// were waiting before it came.
func TestCompletionWaitsForOneClaimAtMost(t *testing.T) {
	admin := newPool(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 2 })
	s := pgstore.New(pool, pgstore.WithTable(uniqueTable(t, admin)))
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	done := idempotency.Key{Scope: "gate", Key: testenv.RandomName("done")}
	claimed, err := s.Claim(ctx, done, "fp", time.Minute, time.Hour)
	if err != nil || !claimed.Acquired {
		t.Fatalf("Claim = %+v, %v", claimed, err)
	}
	keys := lapsedClaims(t, s, 6)
	unlockFirst := lockRows(t, admin, s.Table(), keys[0])
	unlockRest := lockRows(t, admin, s.Table(), keys[1:]...)
	defer unlockFirst()
	defer unlockRest()
	claims := make(chan error, len(keys))
	for i, k := range keys {
		go func() {
			_, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
			claims <- err
		}()
		if i == 0 {
			// keys[0]'s claim holds a connection before the others come.
			testenv.Eventually(t, "the first claim holds a connection", func() bool {
				return pool.Stat().AcquiredConns() == 1
			})
		}
	}
	testenv.Eventually(t, "the claims hold both connections", func() bool {
		return pool.Stat().AcquiredConns() == 2
	})
	completed := make(chan error, 1)
	go func() {
		completed <- s.Complete(ctx, done, claimed.Token, idempotency.Response{Status: 201}, time.Hour)
	}()
	// Whichever claim holds keys[0] finishes when its row is unlocked;
	// every other claim waits for a row that stays locked until the
	// completion is in.
	unlockFirst()
	select {
	case err := <-completed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("Complete still waits for a connection: claims that came before it took the one given back")
	}
	unlockRest()
	for range keys {
		if err := <-claims; err != nil {
			t.Fatal(err)
		}
	}
}
