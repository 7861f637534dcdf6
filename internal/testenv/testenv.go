// Package testenv holds what the tests of several packages need from their
// environment: the URLs of the shared Redis, PostgreSQL and NATS servers, under
// one skip-or-fail rule; names and Redis key prefixes of a test's own in
// those shared servers; polling with Eventually; and StartProxy, a
// tcpproxy.Proxy (latency, cuts, refusals, outages between an instance and
// its store) stopped when the test ends.
//
// The rule: a test that needs a service reads its URL from the environment
// (SAFERETRY_REDIS_URL, SAFERETRY_POSTGRES_URL, SAFERETRY_NATS_URL;
// SAFERETRY_REDIS_CLUSTER_ADDRS for a Redis Cluster, which
// .ci/redis-cluster.sh starts; SAFERETRY_PGBOUNCER_URL for the tests that
// go through a pooler, which .ci/pgbouncer.sh starts). When it is unset the test
// is skipped with a message saying how to run it, unless
// SAFERETRY_REQUIRE_SERVICES=1, in which case it fails. A package whose
// tests need a service runs them through Main, from its TestMain: Main
// fails the package at once when a set URL does not answer or a required
// one is unset, and otherwise prints one SKIP line per unset variable
// whose tests skipped. Main's doc says where go test shows that line (not
// in plain `go test ./...`, which hides a passing package's output).
//
// It is a test helper, not library code, and lives in internal so that it
// is not part of the public API.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"
)

// Environment variables read by the helpers.
const (
	EnvRedisURL        = "SAFERETRY_REDIS_URL"
	EnvPostgresURL     = "SAFERETRY_POSTGRES_URL"
	EnvNATSURL         = "SAFERETRY_NATS_URL"
	EnvPgBouncerURL    = "SAFERETRY_PGBOUNCER_URL"
	EnvRequireServices = "SAFERETRY_REQUIRE_SERVICES"
)

// Example values shown in the skip messages.
const (
	ExampleRedisURL     = "redis://127.0.0.1:6379/0"
	ExamplePostgresURL  = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	ExampleNATSURL      = "nats://127.0.0.1:4222"
	ExamplePgBouncerURL = "postgres://postgres@127.0.0.1:16432/test?sslmode=disable"
)

// RedisURL is Redis.URL: SAFERETRY_REDIS_URL, or a skip of tb when it is
// unset.
func RedisURL(tb testing.TB) string { tb.Helper(); return Redis.URL(tb) }

// PostgresURL is Postgres.URL: SAFERETRY_POSTGRES_URL, or a skip of tb
// when it is unset.
func PostgresURL(tb testing.TB) string { tb.Helper(); return Postgres.URL(tb) }

// NATSURL is NATS.URL: SAFERETRY_NATS_URL (a NATS server with JetStream),
// or a skip of tb when it is unset.
func NATSURL(tb testing.TB) string { tb.Helper(); return NATS.URL(tb) }

// PgBouncerURL is PgBouncer.URL: SAFERETRY_PGBOUNCER_URL, the URL of a
// PgBouncer in transaction pooling mode in front of the test database, or
// a skip of tb when it is unset.
func PgBouncerURL(tb testing.TB) string { tb.Helper(); return PgBouncer.URL(tb) }

// RequireServices reports whether SAFERETRY_REQUIRE_SERVICES=1: a test must
// then fail, not skip, when a service it needs is missing or unreachable.
func RequireServices() bool { return os.Getenv(EnvRequireServices) == "1" }

// Unavailable skips tb, or fails it under SAFERETRY_REQUIRE_SERVICES=1, for
// a service that is configured but cannot be used; why says what went wrong.
func Unavailable(tb testing.TB, why string) {
	tb.Helper()
	if RequireServices() {
		tb.Fatalf("%s (%s=1)", why, EnvRequireServices)
	}
	tb.Skip(why)
}

// Patience bounds every Eventually: long enough for a loaded machine, short
// enough that a broken test fails within the package's time budget.
const Patience = 10 * time.Second

// Eventually polls cond every few milliseconds until it holds, and fails tb
// when it still does not after Patience. what names the awaited condition
// in the failure message. Call it from the test's goroutine only.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Patience)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after %v waiting until %s", Patience, what)
		}
		<-tick.C
	}
}

// RandomName returns prefix followed by 12 random hexadecimal digits: a
// name (key prefix, table, schema, namespace) of one test's own in a store
// that other tests and other packages share.
func RandomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return prefix + hex.EncodeToString(b[:])
}

// Pause waits d, or until ctx ends: a test's pacing that a cancelled test
// does not sit out.
func Pause(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
