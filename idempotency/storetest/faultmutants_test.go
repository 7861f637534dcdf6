package storetest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

// storeFaultsOn runs scenario.StoreFaults on redisstores wrapped by wrap,
// under one fresh prefix of the test Redis (SAFERETRY_REDIS_URL; skipped
// when unset): the fault scenarios need a server behind a proxy, which a
// memstore has not.
func storeFaultsOn(t *testing.T, wrap func(idempotency.Store) idempotency.Store) {
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.EnvRedisURL, err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.RedisPrefix(t, rdb, "saferetry:test:")
	scenario.StoreFaults(t, func(t *testing.T, addr string, poolSize int) idempotency.Store {
		o := *opt
		o.Addr, o.PoolSize, o.MinIdleConns = addr, poolSize, poolSize
		c := redis.NewClient(&o)
		t.Cleanup(func() { c.Close() })
		return wrap(redisstore.New(c, redisstore.WithPrefix(prefix)))
	}, opt.Addr)
}

// TestStoreFaultsCatchBrokenStores runs scenario.StoreFaults over
// redisstores that break one rule each (the wrappers of scenarioBroken),
// in a child process per store, and checks that every fault scenario that
// claims to catch that kind of bug fails. Only the scenarios that fail
// within seconds on the broken store are run: SlowStoreKeepsTheLease and
// ThousandWaitersKeepTheHoldersLease catch renewsNothing, shortLeases and
// stealingClaims too, but take up to their minute on some of them.
// redisstore's TestStoreFaults is the unbroken run. No fault scenario
// claims to catch staleWrites or releasesAnyToken: a holder that knows its
// lease is lost writes nothing to the store (staleWrites fails
// SlowStoreKeepsTheLease at lease/5 only through the extra round trip of
// its Complete, which crowds the pool); the Crash scenario makes the late
// write and catches both.
func TestStoreFaultsCatchBrokenStores(t *testing.T) {
	testenv.RedisURL(t)
	cases := []struct {
		store     string
		scenarios []string // subtests of StoreFaults that must fail
	}{
		{"renewsNothing", []string{"PausedHolderWritesNothing"}},
		{"shortLeases", []string{"StoreSlowerThanTheLease", "PausedHolderWritesNothing", "CutDuringComplete"}},
		{"reusesTokens", []string{"PausedHolderWritesNothing"}},
		{"stealingClaims", []string{"StoreSlowerThanTheLease", "PausedHolderWritesNothing", "CutDuringComplete"}},
	}
	wait := make([]func(testing.TB) (string, bool), len(cases))
	for i, tc := range cases {
		wait[i] = testkit.StartChildTest("^TestScenarioMutantChild$/^StoreFaults$/^("+strings.Join(tc.scenarios, "|")+")$",
			envScenarioMutant, tc.store, 2*time.Minute)
	}
	for i, tc := range cases {
		t.Run(tc.store, func(t *testing.T) {
			out, _ := wait[i](t)
			for _, sc := range tc.scenarios {
				if !strings.Contains(out, "--- FAIL: TestScenarioMutantChild/StoreFaults/"+sc+" ") {
					t.Errorf("fault scenario %s did not fail on %s:\n%s", sc, tc.store, out)
				}
			}
		})
	}
}
