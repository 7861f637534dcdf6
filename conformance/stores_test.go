package conformance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
	"github.com/saferetry/saferetry/mockserver/redisledger"
)

// TestMockServer: the mock server passes every MUST and SHOULD check; it
// scopes keys by namespace, not by principal, so scope-isolation is not
// asked.
func TestMockServer(t *testing.T) {
	srv := mockserver.New(mockserver.WithPaymentWork(work))
	defer srv.Close()
	c := fullChecker(srv.URL + "/payments")
	c.AuthA, c.AuthB, c.TTL = nil, nil, 0
	rep := check(t, c, srv.URL+"/payments")
	wantOutcome(t, rep, nil, []string{conformance.CheckScopeIsolation, conformance.CheckTTLExpiry})
	if n := len(srv.Payments()); n != 3 {
		t.Errorf("the checker made %d payments, want 3 (the first request's, the other body's with a key of its own, and the burst's)", n)
	}
}

// TestMockServerTTL: after the TTL the mock server executes the key anew,
// a new payment, over every ledger: its payments are keyed by
// idempotency.DerivedKey, but a ledger keeps a ref for the TTL only.
// With unkeyed payments the key executes anew too.
func TestMockServerTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) []mockserver.Option
		// skipped are the checks that do not apply besides
		// scope-isolation: in transactional mode a duplicate waits on
		// the row lock, so no 409 comes.
		skipped []string
	}{
		{"keyed payments", func(*testing.T) []mockserver.Option { return nil }, nil},
		{"unkeyed payments", func(*testing.T) []mockserver.Option {
			return []mockserver.Option{mockserver.WithUnkeyedPayments()}
		}, nil},
		{"keyed payments, redisledger", func(t *testing.T) []mockserver.Option {
			rdb := testenv.RedisClient(t)
			prefix := testenv.RedisPrefix(t, rdb, "saferetry-conformance-test")
			return []mockserver.Option{
				mockserver.WithStore(redisstore.New(rdb, redisstore.WithPrefix(prefix))),
				mockserver.WithLedger(redisledger.New(rdb, prefix, nil)),
			}
		}, nil},
		{"keyed payments, pgledger, lease mode", pgledgerOptions(false), nil},
		{"keyed payments, pgledger, transactional mode", pgledgerOptions(true), []string{conformance.CheckConflictRetryAfter}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mockserver.New(append(tc.opts(t), mockserver.WithPaymentWork(work),
				mockserver.WithIdempotencyOptions(idempotency.WithTTL(ttl)))...)
			defer srv.Close()
			c := fullChecker(srv.URL + "/payments")
			c.AuthA, c.AuthB = nil, nil
			rep := check(t, c, srv.URL+"/payments")
			wantOutcome(t, rep, nil, append([]string{conformance.CheckScopeIsolation}, tc.skipped...))
		})
	}
}

// TestMiddlewareOverStores: the idempotency Middleware, keys scoped by
// principal, passes every MUST and SHOULD check over every store and in
// both modes.
func TestMiddlewareOverStores(t *testing.T) {
	for _, tc := range []struct {
		name    string
		store   func(t *testing.T) idempotency.Store
		skipped []string
	}{
		{"memstore", func(t *testing.T) idempotency.Store {
			st := memstore.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		}, nil},
		{"redisstore", func(t *testing.T) idempotency.Store {
			rdb := testenv.RedisClient(t)
			return redisstore.New(rdb, redisstore.WithPrefix(testenv.RedisPrefix(t, rdb, "saferetry-conformance-test")))
		}, nil},
		{"pgstore lease", func(t *testing.T) idempotency.Store { return pgStore(t).Store }, nil},
		// In transactional mode a duplicate waits on the first request's
		// row lock and then replays its answer: no 409 comes.
		{"pgstore tx", func(t *testing.T) idempotency.Store { return pgStore(t) }, []string{conformance.CheckConflictRetryAfter}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := middlewareServer(t, tc.store(t))
			rep := check(t, fullChecker(srv.URL+"/items"), srv.URL+"/items")
			wantOutcome(t, rep, nil, tc.skipped)
		})
	}
}

// middlewareServer serves POST /items behind the Middleware over st, keys
// scoped by the Authorization header, and GET /items.
func middlewareServer(t *testing.T, st idempotency.Store) *httptest.Server {
	items := &naive{entries: map[string]*naiveEntry{}} // only its handler and list are used
	mw := idempotency.Middleware(st, idempotency.WithKeyRequired(true), idempotency.WithTTL(ttl),
		idempotency.WithScope(func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil }))
	mux := http.NewServeMux()
	mux.Handle("POST /items", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		items.execute(w, &naiveEntry{}, readAll(r))
	})))
	mux.Handle("GET /items", items)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// pgStore is a transactional store on a table of the test's own (its
// Store field is the lease-mode store on the same table), dropped at the
// end.
func pgStore(t *testing.T) *pgstore.TxStore { return pgStoreOn(t, burstPool(t)) }

// burstPool is a pool on the test database with a connection open for
// each request of the checker's burst before the checker starts (the
// store's gate lets 15 of them claim at once; the others wait a claim's
// time, not a connection's). With pgx's default pool the burst's
// claims queued three at a time behind connections still to be opened,
// and on a loaded machine the first request finished its work before the
// others had claimed (every answer a replay, no 409 to check).
func burstPool(t *testing.T) *pgxpool.Pool {
	const conns = 20
	pool := testenv.PostgresPool(t, func(c *pgxpool.Config) { c.MaxConns, c.MinConns = conns, conns })
	testenv.Eventually(t, "the pool opens its connections", func() bool { return pool.Stat().TotalConns() >= conns })
	return pool
}

// pgledgerOptions serves the mock server over pgstore and pgledger in
// one table's database, in transactional mode (the payment joins the
// claim's transaction) or in lease mode over the same table.
func pgledgerOptions(tx bool) func(t *testing.T) []mockserver.Option {
	return func(t *testing.T) []mockserver.Option {
		pool := burstPool(t)
		st := pgStoreOn(t, pool)
		l := pgledger.New(pool, st.Table(), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.CreateSchema(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.DropSchema(context.Background()) })
		if tx {
			return []mockserver.Option{mockserver.WithStore(st), mockserver.WithLedger(l)}
		}
		return []mockserver.Option{mockserver.WithStore(st.Store), mockserver.WithLedger(l)}
	}
}

// pgStoreOn is pgStore over pool.
func pgStoreOn(t *testing.T, pool *pgxpool.Pool) *pgstore.TxStore {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	table := testenv.RandomName("conformance_test_")
	st := pgstore.NewTx(pool, pgstore.WithTable(table), pgstore.WithLockTimeout(10*time.Second))
	t.Cleanup(func() {
		_ = st.Close()
		if _, err := pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+table+`"`); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	if err := st.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}
