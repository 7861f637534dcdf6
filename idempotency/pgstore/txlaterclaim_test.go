package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxCompletesTheClaimItHolds: a Tx whose claim batch ran for another
// key than the one it completes (a second claim inside the transaction
// block, or a claim after one that was not acquired), or with another
// ttl than the claim's, stores the outcome under the key it completes,
// kept for the completion's ttl, and leaves the other key as it was.
func TestTxCompletesTheClaimItHolds(t *testing.T) {
	pool := newPool(t)
	s := newTxStore(t, pool, pgstore.WithLockTimeout(30*time.Millisecond))
	ctx := ctxT(t)
	table := pgx.Identifier{s.Table()}.Sanitize()
	// check commits tx's completion of k with ttl and looks at k.
	check := func(t *testing.T, tx idempotency.Tx, k idempotency.Key, token int64, ttl time.Duration) {
		t.Helper()
		if err := tx.Complete(ctx, k, token, idempotency.Response{Status: 201, Body: []byte(k.Key)}, ttl); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		e, found, err := s.Get(ctx, k)
		if err != nil || !found || e.State != idempotency.StateCompleted || string(e.Response.Body) != k.Key {
			t.Fatalf("Get(%v) = %+v, %v, %v; want completed with body %q", k, e, found, err, k.Key)
		}
		var left time.Duration
		if err := pool.QueryRow(ctx, `SELECT expires_at - statement_timestamp() FROM `+table+` WHERE scope = $1 AND key = $2`, k.Scope, k.Key).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left < ttl-time.Minute || left > ttl {
			t.Errorf("%v expires in %v; want the completion's ttl %v", k, left, ttl)
		}
	}
	t.Run("a second claim inside the block", func(t *testing.T) {
		first, second := key("held-first"), key("held-second")
		tx, _ := beginClaim(t, s, first, "fp")
		r, err := tx.Claim(ctx, second, "fp", time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("the second Claim = %+v, %v", r, err)
		}
		check(t, tx, second, r.Token, 3*time.Hour)
		if e, found, err := s.Get(ctx, first); err != nil || !found || e.State != idempotency.StateInProgress {
			t.Errorf("the first key after the commit: %+v, %v, %v; want in progress", e, found, err)
		}
	})
	t.Run("a claim after one not acquired", func(t *testing.T) {
		busy, free := key("later-busy"), key("later-free")
		holder, _, _ := acquire(t, s, busy)
		tx, r := beginClaim(t, s, busy, "fp")
		if r.Acquired {
			t.Fatalf("Claim of a held key = %+v", r)
		}
		r, err := tx.Claim(ctx, free, "fp", time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("the next Claim = %+v, %v", r, err)
		}
		check(t, tx, free, r.Token, 2*time.Hour)
		if err := holder.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if _, found, err := s.Get(ctx, busy); err != nil || found {
			t.Errorf("the held key after its holder rolled back: found %v, %v; want absent", found, err)
		}
	})
}
