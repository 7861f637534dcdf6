package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestClaimOnALostConnectionLetsGoWithinTheLease: on a client that reads
// under the context's deadline alone (ContextTimeoutEnabled, ReadTimeout
// -1: "no timeout"), Claims whose connections a NAT forgot (no reset, no
// close: their reads wait for ever) fail at their deadline, and a Claim
// after them, on a new connection, acquires its key. The script of a
// Claim whose context ended is read to its end under a context that the
// caller's deadline does not end; with no deadline of its own it waited
// for ever, holding its place in the pool's gate: three such Claims
// filled the gate of a pool of four, and every Claim after them failed
// at its deadline, waiting for a place, though Redis answered new
// connections at once. A claim's answer is of no use after its lease,
// when the claim has lapsed: the read waits that long at most.
func TestClaimOnALostConnectionLetsGoWithinTheLease(t *testing.T) {
	const lease = 500 * time.Millisecond
	_, rdb, prefix := newStore(t)
	opt := *rdb.Options()
	proxy := testenv.StartProxy(t, opt.Addr)
	opt.Addr, opt.ContextTimeoutEnabled, opt.ReadTimeout = proxy.Addr(), true, -1
	opt.PoolSize, opt.MinIdleConns = 4, 0 // the gate lets 3 request-path calls through
	far := redis.NewClient(&opt)
	t.Cleanup(func() { far.Close() })
	s := redisstore.New(far, redisstore.WithPrefix(prefix))
	ctx := context.Background()

	// Three connections in the pool, the script loaded.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = far.Do(ctx, "BLPOP", prefix+"nothing", "0.2").Err()
		}()
	}
	wg.Wait()
	mustClaim(t, s, idempotency.Key{Key: "warm"}, "fp", lease, time.Hour)
	if n := far.PoolStats().IdleConns; n != 3 {
		t.Fatalf("%d idle connections, want 3", n)
	}
	if n := proxy.Blackhole(); n != 3 {
		t.Fatalf("blackholed %d connections, want 3", n)
	}

	for _, key := range []string{"a", "b", "c"} {
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		res, err := s.Claim(cctx, idempotency.Key{Key: key}, "fp", lease, time.Hour)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Claim on a lost connection = %+v, %v; want the context's deadline", res, err)
		}
	}

	cctx, cancel := context.WithTimeout(ctx, 4*lease)
	defer cancel()
	start := time.Now()
	res, err := s.Claim(cctx, idempotency.Key{Key: "after"}, "fp", lease, time.Hour)
	if err != nil || !res.Acquired {
		t.Fatalf("Claim after three on lost connections = %+v, %v (after %v); want the key acquired on a new connection within the lease (%v)",
			res, err, time.Since(start).Round(time.Millisecond), lease)
	}
}
