package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestClaimCancelledAfterCommitFreesTheKey: a Claim whose context ends
// after its statement acquired the key in the database, but before the
// answer (and the token) came back, leaves the key free for a retry. It
// held it for a whole lease, the claim's token lost with the answer and
// nobody to run the handler or release it: every retry of the operation
// was answered 409 until the lease lapsed, the outcome of a client that
// gave up at the wrong moment (its timeout while the database was slow).
func TestClaimCancelledAfterCommitFreesTheKey(t *testing.T) {
	const (
		lease   = 20 * time.Second // how long the key stayed held
		latency = 500 * time.Millisecond
		bound   = 3 * time.Second // within which a retry must acquire
	)
	ctx := context.Background()
	admin := newPool(t)
	table := uniqueTable(t, admin)
	direct := pgstore.New(admin, pgstore.WithTable(table))
	t.Cleanup(func() { _ = direct.Close() })
	if err := direct.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	pool, proxy := testenv.ProxiedPostgresPool(t)
	s := pgstore.New(pool, pgstore.WithTable(table))
	t.Cleanup(func() { _ = s.Close() })
	// A first claim opens the connection and runs the store's one-time
	// checks, so that the claim below sends its statement at once.
	if _, err := s.Claim(ctx, idempotency.Key{Scope: "claimcancel", Key: "warm"}, "fp", lease, time.Hour); err != nil {
		t.Fatal(err)
	}

	proxy.SetLatency(latency)
	k := idempotency.Key{Scope: "claimcancel", Key: "k"}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// Cancel once the claim's row is committed: its answer is then
		// still one latency away from the client.
		for cctx.Err() == nil {
			if _, found, err := direct.Get(ctx, k); err == nil && found {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	res, err := s.Claim(cctx, k, "fp", lease, time.Hour)
	if err == nil {
		t.Fatalf("Claim whose context ended before its answer = %+v, nil; want the context's error", res)
	}
	proxy.SetLatency(0)
	if e, found, err := direct.Get(ctx, k); err != nil {
		t.Fatal(err)
	} else if found {
		t.Logf("after the cancelled Claim the key is %v (token %d)", e.State, e.Token)
	}

	start := time.Now()
	for {
		r, err := direct.Claim(ctx, k, "fp", lease, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if r.Acquired {
			t.Logf("a retry acquired the key %v after the cancelled Claim returned", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > bound {
			t.Fatalf("a retry still finds the key %v %v after the cancelled Claim returned (lease %v left %v); want it free",
				r.Entry.State, bound, lease, r.Entry.LeaseRemaining.Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
