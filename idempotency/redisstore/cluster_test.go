package redisstore_test

import (
	"context"
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

// waitOptions are the two ways the cluster tests run a store: without
// waiting for replicas, and with WithWait(1, 2s).
var waitOptions = []struct {
	name string
	opts []redisstore.Option
}{
	{"no wait", nil},
	{"WithWait(1, 2s)", []redisstore.Option{redisstore.WithWait(1, 2*time.Second)}},
}

// TestClusterConformance runs the conformance suite over a
// *redis.ClusterClient on the test cluster, with and without WithWait.
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
