package testenv

import (
	"context"
	"net"
	"net/url"
	"os"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Service is a shared server that a package's tests need, named by the
// environment variable holding its URL: Redis, RedisCluster, Postgres,
// PgBouncer or NATS, passed to Main; URL returns its variable, or skips
// the test that needs it.
// The zero value is not a service. A Service is safe for concurrent use.
type Service struct {
	env, example string
	check        func(ctx context.Context, rawURL string) error
}

// The services Main can check.
var (
	// Redis is SAFERETRY_REDIS_URL, checked with a TCP dial and a PING
	// (which also tries the URL's password and database number).
	Redis = Service{EnvRedisURL, ExampleRedisURL, checkRedis}
	// Postgres is SAFERETRY_POSTGRES_URL, checked with a connection and a
	// ping (which also tries the URL's user, password and database).
	Postgres = Service{EnvPostgresURL, ExamplePostgresURL, checkPostgres}
	// NATS is SAFERETRY_NATS_URL, checked with a connection and a
	// JetStream account lookup (which fails when JetStream is off).
	NATS = Service{EnvNATSURL, ExampleNATSURL, checkNATS}
	// PgBouncer is SAFERETRY_PGBOUNCER_URL, a PgBouncer in transaction
	// pooling mode in front of the test database (.ci/pgbouncer.sh starts
	// one), checked as Postgres is.
	PgBouncer = Service{EnvPgBouncerURL, ExamplePgBouncerURL, checkPostgres}
)

// URL returns the value of s's variable, or skips tb (fails it under
// SAFERETRY_REQUIRE_SERVICES=1) when it is unset, saying how to set it.
func (s Service) URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(s.env)
	if u == "" {
		if !RequireServices() {
			skipped.add(s.env, tb.Name())
		}
		Unavailable(tb, "set "+s.env+"='"+s.example+"' to run")
	}
	return u
}

// checkRedis dials the address first: a refused or unroutable address then
// fails at once, without go-redis's pool retrying and logging each try.
// The PING that follows catches a wrong password or database number.
func checkRedis(ctx context.Context, rawURL string) error {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, opt.Network, opt.Addr)
	if err != nil {
		return err
	}
	conn.Close()
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.PoolSize = 1
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	return rdb.Ping(ctx).Err()
}

func checkPostgres(ctx context.Context, rawURL string) error {
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// dsnPassword matches the password of a keyword/value connection string
// ("host=h password=p"), quoted or not.
var dsnPassword = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// redact returns rawURL fit to print: a password in the user info or in the
// query (PostgreSQL's ?password=) replaced by xxxxx, and a keyword/value
// connection string's password= likewise. What does not parse as a URL is
// not shown at all, since url.Parse's error would quote it whole.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(not shown: not a URL)"
	}
	if u.Scheme == "" {
		return dsnPassword.ReplaceAllString(rawURL, "password=xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
