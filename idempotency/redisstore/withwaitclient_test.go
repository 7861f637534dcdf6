package redisstore_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestWithWaitOnAutoPipeliner: go-redis's AutoPipeliner is a
// UniversalClient of neither type the Store knows, and it leaves the Store
// no say over the connection, or the node, that a command goes to. WithWait
// sent WAIT over it all the same: over a *redis.Client, once ROLE listed a
// replica again, WAIT went by Do on another pooled connection than the
// write's and answered at once; over a *redis.ClusterClient, WAIT, which
// names no key, went to a primary picked at random, which answered for its
// own replicas. Either way a write that no replica held was reported
// replicated, and a failover lost it: the same key was claimed again, the
// operation run twice. New must refuse such a client with WithWait (it
// takes it without), or what the Store reports must hold.
func TestWithWaitOnAutoPipeliner(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		probe := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		t.Cleanup(func() { probe.Close() })
		if refusesWait(t, autoPipeliner(t, probe)) {
			return
		}
		waitAfterReplicasReturn(t, func(c *redis.Client) redis.UniversalClient { return autoPipeliner(t, c) })
	})
	t.Run("cluster", func(t *testing.T) {
		probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
		t.Cleanup(func() { probe.Close() })
		if refusesWait(t, autoPipeliner(t, probe)) {
			return
		}
		c := startOwnCluster(t)
		cc := newClusterClient(t, c.addrs)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const prefix = "saferetry:test:autopipeliner:"
		slot := int(cc.ClusterKeySlot(ctx, entryName(prefix, failoverKey(0))).Val())
		_, replica, holds := primaryAndReplica(t, cc, slot, prefix)
		// The replica of the primary that owns these keys stops:
		// nothing written there now can be acknowledged.
		c.signal(replica, syscall.SIGSTOP)
		t.Cleanup(func() { c.signal(replica, syscall.SIGCONT) })
		store := redisstore.New(autoPipeliner(t, cc), redisstore.WithPrefix(prefix), redisstore.WithWait(1, 200*time.Millisecond))
		n := 0
		for key := range holds {
			if n++; n > 8 {
				break
			}
			res, err := store.Claim(ctx, idempotency.Key{Key: key}, "fp", time.Minute, time.Minute)
			if err == nil {
				t.Errorf("Claim of %s, on a primary whose only replica is stopped = %+v, nil error: reported replicated; want ErrNotReplicated", key, res)
			} else if !errors.Is(err, redisstore.ErrNotReplicated) {
				t.Logf("Claim of %s: %v", key, err) // not reported replicated: safe
			}
		}
	})
}

// autoPipeliner returns c's AutoPipeliner.
func autoPipeliner(t *testing.T, c interface {
	AutoPipeline() (*redis.AutoPipeliner, error)
}) *redis.AutoPipeliner {
	t.Helper()
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// refusesWait reports whether New refuses rdb with WithWait (it panics);
// without WithWait it must take it.
func refusesWait(t *testing.T, rdb redis.UniversalClient) (refused bool) {
	t.Helper()
	redisstore.New(rdb)
	defer func() {
		if p := recover(); p != nil {
			t.Logf("New refuses %T with WithWait: %v", rdb, p)
			refused = true
		}
	}()
	redisstore.New(rdb, redisstore.WithWait(1, time.Second))
	return false
}
