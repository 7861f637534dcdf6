package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// lockRows opens a transaction on a connection of its own that locks the
// rows of keys in s's table, and returns the function that ends it (also
// called at cleanup).
func lockRows(t *testing.T, s *Store, keys ...idempotency.Key) func() {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM `+s.names.table+` WHERE scope = $1 AND key = $2 FOR UPDATE`, k.Scope, k.Key).Scan(&one)
		if err != nil {
			t.Fatalf("lock %v: %v", k, err)
		}
	}
	var once sync.Once
	unlock := func() { once.Do(func() { _ = tx.Rollback(ctx); _ = conn.Close(ctx) }) }
	t.Cleanup(unlock)
	return unlock
}

// lapsedClaims claims n new keys in s with a lease of a millisecond and
// returns them once their leases have lapsed: a claim of one then takes
// it over, which locks its row (and waits for a lock on it).
func lapsedClaims(t *testing.T, s *Store, n int) []idempotency.Key {
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

// takeOver claims k, a lapsed claim, in the background; the error, or nil
// once it acquired, comes on the channel.
func takeOver(s *Store, k idempotency.Key) <-chan error {
	ch := make(chan error, 1)
	go func() {
		r, err := s.Claim(context.Background(), k, "fp", 10*time.Second, time.Hour)
		if err == nil && !r.Acquired {
			err = fmt.Errorf("the takeover of %v answered %+v", k, r)
		}
		ch <- err
	}()
	return ch
}

// TestCompletionFindsTheQuarter checks what the Store's gate keeps the
// last quarter of the pool for: with every claim it lets through waiting
// for a locked row (three on a pool of 4) and a fourth claim behind them,
// a completion still gets a connection at once, not when the rows are
// unlocked.
func TestCompletionFindsTheQuarter(t *testing.T) {
	pool := testenv.PostgresPoolAt(t, testenv.PostgresURL(t), func(c *pgxpool.Config) { c.MaxConns = 4 })
	s := New(pool, WithTable(testenv.PostgresTable(t, pool, "pgstore_gate_")))
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	done := idempotency.Key{Scope: "gate", Key: testenv.RandomName("done")}
	claimed, err := s.Claim(ctx, done, "fp", time.Minute, time.Hour)
	if err != nil || !claimed.Acquired {
		t.Fatalf("Claim = %+v, %v", claimed, err)
	}
	keys := lapsedClaims(t, s, 4)
	unlock := lockRows(t, s, keys...)
	var claims []<-chan error
	for _, k := range keys[:3] {
		claims = append(claims, takeOver(s, k))
	}
	testenv.Eventually(t, "three claims hold connections", func() bool {
		return pool.Stat().AcquiredConns() == 3
	})
	claims = append(claims, takeOver(s, keys[3]))
	// Let the fourth reach the gate (without one it would take the last
	// connection, and the completion would wait for the rows).
	time.Sleep(50 * time.Millisecond)
	completed := make(chan error, 1)
	go func() {
		completed <- s.Complete(ctx, done, claimed.Token, idempotency.Response{Status: 201}, time.Hour)
	}()
	select {
	case err := <-completed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("Complete waited for a connection while claims waiting for locked rows held the pool")
	}
	unlock()
	for _, ch := range claims {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}
