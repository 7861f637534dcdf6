package testenv

import (
	"context"
	"testing"
	"time"

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
