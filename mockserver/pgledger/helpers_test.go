package pgledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// TestMain checks the test database once before any test runs, and says how many
// tests skipped without it; see testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Postgres) }

// newPool returns a pool on the test database (skipping, or failing under
// SAFERETRY_REQUIRE_SERVICES=1, when none is configured), closed at the end
// of tb. Each pool stands for a process of its own.
func newPool(tb testing.TB, mutate ...func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	pool := testenv.PostgresPool(tb, mutate...)
	if err := pool.Ping(ctxT(tb)); err != nil {
		testenv.Unavailable(tb, "postgres at "+pool.Config().ConnConfig.Host+": "+err.Error())
	}
	return pool
}

// newTable returns a fresh ledger table name with its tables created on
// pool, and drops them at the end of tb (before pool closes, after the
// pools opened later close).
func newTable(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	table := testenv.RandomName("pgledger_test_")
	l := pgledger.New(pool, table, nil)
	if err := l.CreateSchema(ctxT(tb)); err != nil {
		tb.Fatalf("CreateSchema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.DropSchema(ctx); err != nil {
			tb.Errorf("DropSchema: %v", err)
		}
	})
	return table
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func payment(id string, amount int64, currency string) mockserver.Payment {
	return mockserver.Payment{
		ID: id, Amount: amount, Currency: currency, Recipient: "r ✓", Status: "succeeded",
		IdempotencyKey: "k-" + id, Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	}
}

// scalar runs a query of one int64 on pool.
func scalar(tb testing.TB, pool *pgxpool.Pool, sql string, args ...any) int64 {
	tb.Helper()
	var n int64
	if err := pool.QueryRow(ctxT(tb), sql, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return n
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
