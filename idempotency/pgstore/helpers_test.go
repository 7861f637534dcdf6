package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestMain checks the test database once before any test runs, and says how many
// tests skipped without it; see testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Postgres, testenv.PgBouncer) }

// pgURL returns the test database URL, or skips (fails under
// SAFERETRY_REQUIRE_SERVICES=1) when it is not set.
func pgURL(tb testing.TB) string {
	tb.Helper()
	return testenv.PostgresURL(tb)
}

// newPool returns a pool on the test database, closed at cleanup.
func newPool(tb testing.TB, mutate ...func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	return pgTarget{url: pgURL(tb)}.newPool(tb, mutate...)
}

// pgTarget is where and how a test's pools connect: a database URL,
// direct or through PgBouncer, and the pgx exec mode.
type pgTarget struct {
	url  string
	mode pgx.QueryExecMode // zero: the URL's (pgx's default unless it says default_query_exec_mode)
	// listenURL, when set, is a direct connection for the stores' LISTEN
	// connection (pgstore.WithListenConfig): url goes through PgBouncer.
	listenURL string
}

// newPool returns a pool on tg, closed at cleanup.
func (tg pgTarget) newPool(tb testing.TB, mutate ...func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	if tg.mode != 0 {
		setMode := func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = tg.mode }
		mutate = append([]func(*pgxpool.Config){setMode}, mutate...)
	}
	return testenv.PostgresPoolAt(tb, tg.url, mutate...)
}

// uniqueTable returns a fresh table name and drops the table at cleanup,
// so that tests never see each other's rows (other packages share the
// database too).
func uniqueTable(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	return testenv.PostgresTable(tb, pool, "pgstore_test_")
}

// opts returns the store options tg needs: a direct LISTEN connection
// behind PgBouncer.
func (tg pgTarget) opts(tb testing.TB, more ...pgstore.Option) []pgstore.Option {
	tb.Helper()
	if tg.listenURL == "" {
		return more
	}
	cfg, err := pgx.ParseConfig(tg.listenURL)
	if err != nil {
		tb.Fatalf("parse %s: %v", tg.listenURL, err)
	}
	return append([]pgstore.Option{pgstore.WithListenConfig(cfg)}, more...)
}

// store is newStore on tg: on pool or, when pool is nil, on a new pool on tg.
func (tg pgTarget) store(tb testing.TB, pool *pgxpool.Pool, opts ...pgstore.Option) *pgstore.Store {
	tb.Helper()
	if pool == nil {
		pool = tg.newPool(tb)
	}
	return newStore(tb, pool, tg.opts(tb, opts...)...)
}

// txStore is newTxStore on tg.
func (tg pgTarget) txStore(tb testing.TB, pool *pgxpool.Pool, opts ...pgstore.Option) *pgstore.TxStore {
	tb.Helper()
	if pool == nil {
		pool = tg.newPool(tb)
	}
	return newTxStore(tb, pool, tg.opts(tb, opts...)...)
}

// newStore returns a lease-mode store on a fresh table with its schema, on
// pool or, when pool is nil, on a new pool.
func newStore(tb testing.TB, pool *pgxpool.Pool, opts ...pgstore.Option) *pgstore.Store {
	tb.Helper()
	if pool == nil {
		pool = newPool(tb)
	}
	s := pgstore.New(pool, append([]pgstore.Option{pgstore.WithTable(uniqueTable(tb, pool))}, opts...)...)
	tb.Cleanup(func() { _ = s.Close() }) // before the pool closes
	if err := s.CreateSchema(ctxT(tb)); err != nil {
		tb.Fatalf("CreateSchema: %v", err)
	}
	return s
}

// newTxStore returns a transactional store on a fresh table with its schema.
func newTxStore(tb testing.TB, pool *pgxpool.Pool, opts ...pgstore.Option) *pgstore.TxStore {
	tb.Helper()
	if pool == nil {
		pool = newPool(tb)
	}
	s := pgstore.NewTx(pool, append([]pgstore.Option{pgstore.WithTable(uniqueTable(tb, pool))}, opts...)...)
	tb.Cleanup(func() { _ = s.Close() })
	if err := s.CreateSchema(ctxT(tb)); err != nil {
		tb.Fatalf("CreateSchema: %v", err)
	}
	return s
}

// newBizTxStore returns a pool of t's own, a transactional store on it
// with a fresh table, the name of a business table beside that table (see
// bizTable), and a context for t.
func newBizTxStore(t *testing.T) (*pgxpool.Pool, *pgstore.TxStore, string, context.Context) {
	t.Helper()
	pool := newPool(t)
	s := newTxStore(t, pool)
	return pool, s, bizTable(t, pool, s), ctxT(t)
}

// ctxT returns a context bounded well under the package's test budget.
func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func key(name string) idempotency.Key {
	return idempotency.Key{Scope: "tenant-" + name, Key: "key-" + name}
}

func count(tb testing.TB, pool *pgxpool.Pool, table string) int {
	tb.Helper()
	var n int
	if err := pool.QueryRow(ctxT(tb), `SELECT count(*) FROM "`+table+`"`).Scan(&n); err != nil {
		tb.Fatalf("count %s: %v", table, err)
	}
	return n
}

func contextWithCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}
