package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestClusterStalledPrimaryLeavesOthersServing stops one primary of a
// cluster of the test's own with SIGSTOP (a node that hangs, or a host cut
// off by the network: its connections neither answer nor fail until a
// timeout, and the cluster only fails it over after cluster-node-timeout,
// 15 s by default). Claims of keys on its slots wait for it; claims of
// keys on the other primaries, which answer at once, must not wait behind
// them. Claim and Get hold at most three quarters of the pool, which
// go-redis keeps per node: a bound shared by all the nodes lets the
// stalled node's claims take every place, and the whole cluster stops
// answering.
func TestClusterStalledPrimaryLeavesOthersServing(t *testing.T) {
	// A node timeout that leaves the test seconds before the stopped
	// node is failed (and, with cluster-require-full-coverage, every slot
	// answers CLUSTERDOWN).
	const nodeTimeout = 5 * time.Second
	c := startOwnClusterTimeout(t, nodeTimeout)
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs, PoolSize: 4, ReadTimeout: 3 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	sent := &inFlight{}
	rdb.AddHook(sent)
	if err := rdb.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	prefix := newPrefix(t, rdb)
	s := redisstore.New(rdb, redisstore.WithPrefix(prefix))

	victim := ""
	var stalled []idempotency.Key
	var healthy idempotency.Key
	for i := 0; len(stalled) < 4 || healthy.Key == ""; i++ {
		k := idempotency.Key{Key: fmt.Sprintf("stall-%d", i)}
		node, err := rdb.MasterForKey(ctx, entryName(prefix, k.Key))
		if err != nil {
			t.Fatal(err)
		}
		switch addr := node.Options().Addr; {
		case victim == "":
			victim = addr
			stalled = append(stalled, k)
		case addr == victim:
			if len(stalled) < 4 {
				stalled = append(stalled, k)
			}
		case healthy.Key == "":
			healthy = k
		}
	}
	// Warm a connection to every primary, so that the claims below need
	// no dial.
	mustClaim(t, s, idempotency.Key{Key: "warm-" + stalled[0].Key}, "fp", longLease, longTTL)
	mustClaim(t, s, idempotency.Key{Key: "warm-" + healthy.Key}, "fp", longLease, longTTL)

	c.signal(victim, syscall.SIGSTOP)
	stopped := time.Now()
	t.Cleanup(func() { c.signal(victim, syscall.SIGCONT) })
	for _, k := range stalled {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, _ = s.Claim(ctx, k, "fp", longLease, longTTL) // waits for the stopped node
		}()
	}
	// The store lets three of them through (PoolSize 4, a quarter kept
	// for settling calls); the fourth waits for a place.
	testenv.Eventually(t, "the claims on the stopped node are sent", func() bool { return sent.n.Load() >= 3 })

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err := s.Claim(cctx, healthy, "fp", longLease, longTTL)
	if elapsed := time.Since(stopped); elapsed > nodeTimeout*3/4 {
		t.Fatalf("the claim on a healthy primary came %v after the SIGSTOP, past cluster-node-timeout: the test is too slow to tell", elapsed)
	}
	if err != nil || !res.Acquired {
		t.Errorf("Claim of a key on a healthy primary while %s is stopped = %+v, %v (deadline exceeded: %v); want it acquired",
			victim, res, err, errors.Is(err, context.DeadlineExceeded))
	}
}

// inFlight counts the commands a client has sent and not yet got an
// answer to.
type inFlight struct{ n atomic.Int32 }

func (f *inFlight) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *inFlight) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.n.Add(1)
		defer f.n.Add(-1)
		return next(ctx, cmd)
	}
}

func (f *inFlight) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
