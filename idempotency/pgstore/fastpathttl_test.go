package pgstore_test

import (
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestFastPathRefusesNonPositiveTTL: a Claim with a ttl that is not
// positive is an error on the claim path (the package documentation:
// "a lease or ttl that is not positive is an error"), and the replay fast
// path must answer as the claim would: it read a completed key first and
// replayed it, so the same call succeeded or failed with the path the
// window had chosen. In lease mode and in transactional mode.
func TestFastPathRefusesNonPositiveTTL(t *testing.T) {
	pool := newPool(t)
	plain := newTxStore(t, pool, pgstore.WithoutReplayFastPath())
	fast := pgstore.NewTx(pool, pgstore.WithTable(plain.Table()), pgstore.WithReplayFastPath())
	t.Cleanup(func() { _ = fast.Close() })
	k := key("fast-ttl")
	completeAs(t, plain.Store, k, "fp", "done")
	for _, ttl := range []time.Duration{0, -time.Second} {
		for _, s := range []struct {
			name  string
			store *pgstore.TxStore
		}{{"without", plain}, {"with", fast}} {
			if r, err := s.store.Claim(ctxT(t), k, "fp", time.Minute, ttl); err == nil {
				t.Errorf("lease mode %s the fast path: Claim with ttl %v = %+v, want an error", s.name, ttl, r)
			}
			tx, err := s.store.BeginTx(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := tx.Claim(ctxT(t), k, "fp", ttl); err == nil {
				t.Errorf("transactional mode %s the fast path: Claim with ttl %v = %+v, want an error", s.name, ttl, r)
			}
			endTx(t, tx, false)
		}
	}
}
