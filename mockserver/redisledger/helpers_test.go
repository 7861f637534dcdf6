package redisledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestMain checks the test Redis once before any test runs, and says how many
// tests skipped without it; see testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Redis) }

// newClient connects to the test Redis (skipping, or failing under
// SAFERETRY_REQUIRE_SERVICES=1, when none is configured) and closes the
// client at the end of tb.
func newClient(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := testenv.RedisClient(tb)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		testenv.Unavailable(tb, "redis at "+rdb.Options().Addr+": "+err.Error())
	}
	return rdb
}

// newPrefix returns a key prefix of tb's own and deletes its keys at the
// end of tb, after the clients opened later are closed.
func newPrefix(tb testing.TB, rdb redis.UniversalClient) string {
	tb.Helper()
	return testenv.RedisPrefix(tb, rdb, "saferetry:test:ledger:")
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
