package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
)

// TestStoreFaults runs the store fault scenarios (latency, a paused
// holder, a cut during Complete, a thousand waiters) through a proxy in
// front of the test Redis, with stores sharing one fresh prefix.
func TestStoreFaults(t *testing.T) {
	opt := redisOptions(t)
	prefix := newPrefix(t, newClient(t))
	scenario.StoreFaults(t, func(t *testing.T, addr string, poolSize int) idempotency.Store {
		o := *opt
		o.Addr, o.PoolSize, o.MinIdleConns = addr, poolSize, poolSize
		rdb := redis.NewClient(&o)
		t.Cleanup(func() { rdb.Close() })
		return redisstore.New(rdb, redisstore.WithPrefix(prefix))
	}, opt.Addr)
}

// TestWatchAcrossInstances: pub/sub wakes a waiter on another instance.
func TestWatchAcrossInstances(t *testing.T) {
	holder, _, prefix := newStore(t)
	scenario.WatchAcrossInstances(t, holder, redisstore.New(newClient(t), redisstore.WithPrefix(prefix)))
}
