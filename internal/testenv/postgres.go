package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresPool returns a pool on SAFERETRY_POSTGRES_URL (skipping tb as
// PostgresURL does), closed when tb ends.
func PostgresPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), PostgresURL(tb))
	if err != nil {
		tb.Fatalf("testenv: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
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
