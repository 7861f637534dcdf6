package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestWaitAfterReplicasReturnWaitsForTheWrite: once a primary that
// WithWait found short of replicas lists enough of them again, the next
// write must still be acknowledged by a replica before it is reported
// replicated. WAIT counts the replicas that acknowledged the last write of
// its own connection, so it must go over the connection that wrote. Here
// the only replica is connected but 2 s behind (a proxy delays its link),
// so it cannot acknowledge within WithWait's 300 ms: a Claim that reports
// success was not replicated, and when the primary dies before the claim
// reached the replica, the promoted replica lets the same key be claimed
// again, a second execution.
func TestWaitAfterReplicasReturnWaitsForTheWrite(t *testing.T) {
	waitAfterReplicasReturn(t, func(c *redis.Client) redis.UniversalClient { return c })
}

// waitAfterReplicasReturn is TestWaitAfterReplicasReturnWaitsForTheWrite
// with the Store on the client that wrap makes of the primary's.
func waitAfterReplicasReturn(t *testing.T, wrap func(*redis.Client) redis.UniversalClient) {
	primary := ownRedis(t)
	replica := ownRedis(t, "--repl-ping-replica-period", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// PoolFIFO hands out the connection idle the longest, as any pool
	// under concurrent use may: not the one the last command used.
	rdb := redis.NewClient(&redis.Options{Addr: primary.Options().Addr, PoolFIFO: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	store := redisstore.New(wrap(rdb), redisstore.WithWait(1, 300*time.Millisecond))
	const lease, ttl = 10 * time.Second, time.Minute

	// No replica yet: the first claim waits out WAIT and marks the
	// primary short of replicas.
	if _, err := store.Claim(ctx, idempotency.Key{Scope: "s", Key: "k0"}, "fp", lease, ttl); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("Claim without a replica = %v, want ErrNotReplicated", err)
	}
	// A few idle connections in the pool besides the one that wrote.
	var conns []*redis.Conn
	for range 3 {
		c := rdb.Conn()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}

	// The replica joins through a proxy and catches up; then its link
	// slows down.
	link := testenv.StartProxy(t, primary.Options().Addr)
	host, port, _ := strings.Cut(link.Addr(), ":")
	if err := replica.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the replica is online and has acknowledged the primary's offset", func() bool {
		info := primary.Info(ctx, "replication").Val()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") &&
			primary.Do(ctx, "WAIT", 1, 100).Val() == int64(1)
	})
	link.SetLatency(2 * time.Second)

	k := idempotency.Key{Scope: "s", Key: "k1"}
	res, err := store.Claim(ctx, k, "fp", lease, ttl)
	if errors.Is(err, redisstore.ErrNotReplicated) {
		return // refused, and given back: nothing was reported replicated
	}
	if err != nil {
		t.Fatalf("Claim with the replica 2 s behind = %v, want ErrNotReplicated", err)
	}
	t.Errorf("Claim with the only replica 2 s behind = %+v, nil error: reported acknowledged by 1 replica within 300 ms, want ErrNotReplicated", res)

	// What that costs: the primary dies before the claim reached the
	// replica, the replica is promoted, and a retry claims the key again.
	link.Stop()
	_ = primary.Shutdown(ctx).Err() // it answers by closing the connection
	if err := replica.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	again, err := redisstore.New(replica).Claim(ctx, k, "fp", lease, ttl)
	if err != nil {
		t.Fatalf("Claim on the promoted replica: %v", err)
	}
	if again.Acquired {
		t.Errorf("after the failover the key was claimed again (token %d): the operation runs twice", again.Token)
	}
}

// TestWaitOnceOnPrimaryWithoutScripts: a primary promoted in a failover
// has neither a replica nor the store's scripts (Redis does not replicate
// its script cache), so the first write there gets NOSCRIPT and is sent
// again as EVAL. WithWait must still wait out its timeout once, as it
// documents ("or until timeout"; "only the first write finds out by
// waiting out the WAIT timeout"): the WAIT that followed the refused
// EVALSHA waited the whole timeout for nothing, and the EVAL's WAIT the
// whole timeout again, so that a claim took twice the timeout (6 s with
// WithWait(1, 3s), past the middleware's 5 s store timeout).
func TestWaitOnceOnPrimaryWithoutScripts(t *testing.T) {
	rdb := ownRedis(t) // no replica, an empty script cache
	const timeout = time.Second
	store := redisstore.New(rdb, redisstore.WithWait(1, timeout))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := store.Claim(ctx, idempotency.Key{Scope: "s", Key: "k"}, "fp", 10*time.Second, time.Minute)
	took := time.Since(start)
	if !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("Claim = %v, want ErrNotReplicated", err)
	}
	// Two waits take at least twice the timeout, whatever the machine's
	// load; one wait, with the round trips around it, well under that.
	if took >= 2*timeout {
		t.Errorf("Claim took %v with WithWait(1, %v): waited out the WAIT timeout more than once", took.Round(time.Millisecond), timeout)
	}
}
