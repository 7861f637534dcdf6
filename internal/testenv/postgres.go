package testenv

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresPool returns a pool on SAFERETRY_POSTGRES_URL (skipping tb as
// PostgresURL does), its config changed by each of mutate in turn, closed
// when tb ends. It does not connect: Main checked the service once already.
func PostgresPool(tb testing.TB, mutate ...func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	return PostgresPoolAt(tb, PostgresURL(tb), mutate...)
}

// PostgresPoolAt is PostgresPool on the database at url (through
// PgBouncer, say).
func PostgresPoolAt(tb testing.TB, url string, mutate ...func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", redact(url), err)
	}
	for _, m := range mutate {
		m(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("testenv: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// ProxiedPostgresPool is PostgresPool through a proxy of tb's own (see
// StartProxy), which the test may stall or cut; the proxy stops stalling
// before the pool closes, so that the pool's Close does not wait for it.
func ProxiedPostgresPool(tb testing.TB, mutate ...func(*pgxpool.Config)) (*pgxpool.Pool, *Proxy) {
	tb.Helper()
	var proxy *Proxy
	pool := PostgresPool(tb, append([]func(*pgxpool.Config){func(cfg *pgxpool.Config) {
		cc := cfg.ConnConfig
		proxy = StartProxy(tb, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
		host, port, _ := net.SplitHostPort(proxy.Addr())
		p, _ := strconv.Atoi(port)
		cc.Host, cc.Port, cc.Fallbacks = host, uint16(p), nil
	}}, mutate...)...)
	tb.Cleanup(func() { proxy.SetStall(false) }) // runs before the pool's Close
	return pool, proxy
}

// PostgresTable returns a table name of tb's own, RandomName(prefix), and
// drops that table (if it was created) when tb ends. Register it after the
// pool, so that the drop runs before the pool closes.
func PostgresTable(tb testing.TB, pool *pgxpool.Pool, prefix string) string {
	tb.Helper()
	name := RandomName(prefix)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS "`+name+`"`); err != nil {
			tb.Errorf("testenv: drop %s: %v", name, err)
		}
	})
	return name
}

// PostgresTx begins a transaction on pool that holds its rows and locks
// uncommitted while tb runs, and rolls it back when tb ends (nothing to do
// if tb committed or rolled it back itself). Register it after the pool and
// the tables, so that the rollback runs before the tables are dropped.
func PostgresTx(tb testing.TB, pool *pgxpool.Pool) pgx.Tx {
	tb.Helper()
	tx, err := pool.Begin(context.Background())
	if err != nil {
		tb.Fatalf("testenv: begin: %v", err)
	}
	tb.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}
