package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// heldEntry is an entry in progress as the store keeps it (entry.go):
// the state and the waiters' mark, the token, the lease's start and
// length in microseconds, and the stored fingerprint.
type heldEntry struct {
	head              string
	tok, start, lease int64
	storedFingerprint string
}

// readHeld reads the entry in progress named name.
func readHeld(tb testing.TB, rdb *redis.Client, name string) heldEntry {
	tb.Helper()
	v, err := rdb.Get(context.Background(), name).Result()
	if err != nil {
		tb.Fatalf("GET %s: %v", name, err)
	}
	f := strings.SplitN(v, ",", 4)
	if len(f) != 4 || len(f[0]) < 3 {
		tb.Fatalf("entry %q is not one in progress", v)
	}
	e := heldEntry{head: f[0][:2], storedFingerprint: f[3]}
	for i, p := range []*int64{&e.tok, &e.start, &e.lease} {
		s := f[i]
		if i == 0 {
			s = s[2:]
		}
		if *p, err = strconv.ParseInt(s, 10, 64); err != nil {
			tb.Fatalf("entry %q: %v", v, err)
		}
	}
	return e
}

// moveLease moves the lease of the entry in progress named name to lapse
// at expiry (server time, microseconds since the epoch), keeping the
// entry's own expiry: it rewrites the lease start, expiry less the lease.
func moveLease(tb testing.TB, rdb *redis.Client, name string, expiry int64) {
	tb.Helper()
	e := readHeld(tb, rdb, name)
	v := fmt.Sprintf("%s%d,%d,%d,%s", e.head, e.tok, expiry-e.lease, e.lease, e.storedFingerprint)
	if err := rdb.Set(context.Background(), name, v, redis.KeepTTL).Err(); err != nil {
		tb.Fatal(err)
	}
}
