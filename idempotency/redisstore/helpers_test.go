package redisstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestMain checks the test Redis once before any test runs, and says how many
// tests skipped without it; see testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Redis, testenv.RedisCluster) }

// redisOptions returns the options of the test Redis, or skips (fails with
// SAFERETRY_REQUIRE_SERVICES=1) when none is configured.
func redisOptions(tb testing.TB) *redis.Options {
	tb.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL(tb))
	if err != nil {
		tb.Fatalf("parse %s: %v", testenv.EnvRedisURL, err)
	}
	return opt
}

// newClient connects to the test Redis and closes the client at the end.
func newClient(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(redisOptions(tb))
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		rdb.Close()
		tb.Fatalf("redis at %s: %v", testenv.RedisURL(tb), err)
	}
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// newPrefix returns a key prefix of its own for tb and deletes every key
// under it at the end, so tests never see or touch other tests' data.
func newPrefix(tb testing.TB, rdb redis.UniversalClient) string {
	tb.Helper()
	return testenv.RedisPrefix(tb, rdb, "saferetry:test:")
}

// newStore returns a store on the test Redis under a fresh prefix.
func newStore(tb testing.TB, opts ...redisstore.Option) (*redisstore.Store, *redis.Client, string) {
	tb.Helper()
	rdb := newClient(tb)
	prefix := newPrefix(tb, rdb)
	return redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...), rdb, prefix
}

// roundTrips counts the commands and pipelines a client sends: each is one
// round trip to Redis.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}
