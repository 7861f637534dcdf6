package redisstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/testenv"
)

// newClusterClient connects to the cluster at addrs and closes the client
// at the end.
func newClusterClient(tb testing.TB, addrs []string) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		rdb.Close()
		tb.Fatalf("redis cluster at %v: %v", addrs, err)
	}
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// waitOptions are the ways the cluster tests run a store: without waiting
// for replicas, with WithWait(1, 2s), and with it and the replay fast path.
var waitOptions = []struct {
	name string
	opts []redisstore.Option
}{
	{"no wait", nil},
	{"WithWait(1, 2s)", []redisstore.Option{redisstore.WithWait(1, 2*time.Second)}},
	{"WithWait(1, 2s) and WithReplayFastPath", []redisstore.Option{redisstore.WithWait(1, 2*time.Second), redisstore.WithReplayFastPath()}},
}

// TestClusterConformance runs the conformance suite over a
// *redis.ClusterClient on the test cluster, with and without WithWait (and
// with the replay fast path).
func TestClusterConformance(t *testing.T) {
	addrs := testenv.RedisClusterAddrs(t)
	for _, w := range waitOptions {
		t.Run(w.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) idempotency.Store {
				rdb := newClusterClient(t, addrs)
				prefix := newPrefix(t, rdb)
				return redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, w.opts...)...)
			}, storetest.Watching)
		})
	}
}

// TestClusterKeyReused: the shared scenario of a used key sent with
// another payload, over a cluster client, with and without WithWait.
func TestClusterKeyReused(t *testing.T) {
	addrs := testenv.RedisClusterAddrs(t)
	for _, w := range waitOptions {
		t.Run(w.name, func(t *testing.T) {
			rdb := newClusterClient(t, addrs)
			prefix := newPrefix(t, rdb)
			scenario.KeyReused(t, redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, w.opts...)...))
		})
	}
}

// TestClusterExactlyOnce: the shared exactly-once scenario (three
// instances, each key's duplicates sent at once) over a cluster client,
// with and without WithWait; the entries must spread over every primary,
// whatever braces the keys hold.
func TestClusterExactlyOnce(t *testing.T) {
	addrs := testenv.RedisClusterAddrs(t)
	for _, w := range waitOptions {
		t.Run(w.name, func(t *testing.T) {
			rdb := newClusterClient(t, addrs)
			prefix := newPrefix(t, rdb)
			scenario.ExactlyOnce(t, redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, w.opts...)...))
			perPrimary := keysPerPrimary(t, rdb, prefix)
			t.Logf("entries per primary: %v", perPrimary)
			if len(perPrimary) != 3 {
				t.Errorf("entries on %d primaries (%v), want all 3", len(perPrimary), perPrimary)
			}
			for addr, n := range perPrimary {
				if n == 0 {
					t.Errorf("primary %s holds no entry: %v", addr, perPrimary)
				}
			}
		})
	}
}

// keysPerPrimary counts the keys under prefix on each primary of rdb.
func keysPerPrimary(t *testing.T, rdb *redis.ClusterClient, prefix string) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		n := len(testenv.RedisKeys(t, node, prefix))
		mu.Lock()
		defer mu.Unlock()
		counts[node.Options().Addr] = n
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachMaster: %v", err)
	}
	return counts
}

// entryName is the Redis key of key's entry in scope "" under prefix (see
// the package documentation's data layout).
func entryName(prefix, key string) string { return prefix + "{}0::" + key }

// TestClusterWithWaitFollowsMovedSlot moves an empty slot to another
// primary on a cluster of the test's own: WithWait's pipeline goes to the
// node the client's map names, which answers MOVED, and go-redis does not
// reload for a pipeline sent to one node; the Store must ask for the
// reload, so that a retry of the claim lands on the new owner within
// seconds, not after the 60 s reload interval.
func TestClusterWithWaitFollowsMovedSlot(t *testing.T) {
	c := startOwnCluster(t)
	ctx := context.Background()
	rdb := newClusterClient(t, c.addrs)
	prefix := newPrefix(t, rdb)
	s := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithWait(1, 2*time.Second))
	k := idempotency.Key{Key: "moved"}
	name := entryName(prefix, k.Key)
	slot, err := rdb.ClusterKeySlot(ctx, name).Result()
	if err != nil {
		t.Fatal(err)
	}
	from, err := rdb.MasterForKey(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var to *redis.Client
	for _, s := range slots {
		if addr := s.Nodes[0].Addr; addr != from.Options().Addr && to == nil {
			to = redis.NewClient(&redis.Options{Addr: addr})
			defer to.Close()
		}
	}
	if to == nil {
		t.Fatal("no second primary")
	}
	fromID, toID := from.Do(ctx, "CLUSTER", "MYID").Val(), to.Do(ctx, "CLUSTER", "MYID").Val()
	// The slot holds no key: importing, migrating, then owned by to.
	for _, step := range []struct {
		node *redis.Client
		args []any
	}{
		{to, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", fromID}},
		{from, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", toID}},
		{to, []any{"CLUSTER", "SETSLOT", slot, "NODE", toID}},
		{from, []any{"CLUSTER", "SETSLOT", slot, "NODE", toID}},
	} {
		if err := step.node.Do(ctx, step.args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", step.args, step.node.Options().Addr, err)
		}
	}
	first, err := s.Claim(ctx, k, "fp", longLease, longTTL)
	if err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Fatalf("first Claim after the move = %+v, %v; want the old owner's MOVED", first, err)
	}
	testenv.Eventually(t, "a Claim reaches the slot's new owner", func() bool {
		res, err := s.Claim(ctx, k, "fp", longLease, longTTL)
		return err == nil && res.Acquired
	})
	if n, err := to.Exists(ctx, name).Result(); err != nil || n != 1 {
		t.Errorf("the entry on the new owner %s: %d, %v; want it there", to.Options().Addr, n, err)
	}
}
