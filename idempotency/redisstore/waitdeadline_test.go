package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestClaimWhoseContextEndsDuringWaitIsGivenBack: under WithWait, on a
// client that reads under the context's deadline (ContextTimeoutEnabled),
// a Claim whose context ends while WAIT waits for replicas (a request
// deadline shorter than the WAIT timeout, on a primary without replicas) has
// written its claim and holds its answer, but failed with the read's
// timeout: the claim, which no caller holds a token of, was not given
// back, so every retry was told "in progress" until its lease lapsed, as
// before the fix for a WAIT cut short by ReadTimeout. (Claim returns when
// its context ends; the claim is given back just after.)
func TestClaimWhoseContextEndsDuringWaitIsGivenBack(t *testing.T) {
	addr := startRedis(t, false, "--save", "", "--appendonly", "no")
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	// Load the claim script, so that the Claim below writes at its first
	// EVALSHA and WAIT is what its deadline ends.
	if _, err := redisstore.New(rdb).Claim(ctx, idempotency.Key{Key: "other"}, "fp", time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, timeout := range []time.Duration{2 * time.Second, 10 * time.Second} { // pipelined WAIT; WAIT after the write (waitAlone)
		s := redisstore.New(rdb, redisstore.WithWait(1, timeout))
		k := idempotency.Key{Key: "k" + timeout.String()}
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := s.Claim(cctx, k, "fp", time.Minute, time.Hour)
		cancel()
		if err == nil {
			t.Fatalf("WithWait(1, %v): Claim without a replica succeeded", timeout)
		}
		// Claim returns when its context ends, as WAIT fails: the claim
		// is given back a round trip later, not a WAIT timeout or a
		// lease later.
		start := time.Now()
		testenv.Eventually(t, "the claim is given back", func() bool {
			_, found, err := s.Get(ctx, k)
			return !found && err == nil
		})
		if took := time.Since(start); took >= time.Second {
			t.Errorf("WithWait(1, %v): the claim of a Claim whose context ended during WAIT was given back %v after Claim returned; want at once",
				timeout, took.Round(time.Millisecond))
		}
	}
}
