package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/scenario"
)

// faultLease is the lease of the fault scenarios: short, so that each runs
// in a few seconds, and long enough for the latencies they inject.
const faultLease = 600 * time.Millisecond

// slowLease is the lease of the slow-store scenario.
const slowLease = time.Second

// storeAt returns a scenario.StoreAt for Redis stores sharing one fresh
// prefix, and the address of the test Redis.
func storeAt(t *testing.T) (scenario.StoreAt, string) {
	opt := redisOptions(t)
	prefix := newPrefix(t, newClient(t))
	return func(t *testing.T, addr string, poolSize int) idempotency.Store {
		o := *opt
		o.Addr, o.PoolSize, o.MinIdleConns = addr, poolSize, poolSize
		rdb := redis.NewClient(&o)
		t.Cleanup(func() { rdb.Close() })
		return redisstore.New(rdb, redisstore.WithPrefix(prefix))
	}, opt.Addr
}

func TestSlowStoreKeepsTheLease(t *testing.T) {
	for _, div := range []time.Duration{10, 5} {
		t.Run("latency lease/"+strconv.Itoa(int(div)), func(t *testing.T) {
			at, target := storeAt(t)
			// A longer lease gives a loaded machine more slack in absolute
			// terms; the latency is the same fraction of it.
			scenario.SlowStore(t, at, target, slowLease, slowLease/div)
		})
	}
}

func TestStoreSlowerThanTheLease(t *testing.T) {
	at, target := storeAt(t)
	scenario.StoreSlowerThanLease(t, at, target, faultLease/2, faultLease*3/4)
}

func TestPausedHolderWritesNothing(t *testing.T) {
	at, target := storeAt(t)
	scenario.PausedHolder(t, at, target, faultLease/2)
}

func TestCutDuringComplete(t *testing.T) {
	at, target := storeAt(t)
	scenario.CutDuringComplete(t, at, target, faultLease*2)
}

func TestThousandWaitersKeepTheHoldersLease(t *testing.T) {
	at, target := storeAt(t)
	scenario.ManyWaiters(t, at, target, faultLease)
}
