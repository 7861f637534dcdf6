package pgstore_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestMiddlewareRoundTrips counts the statements and batches the Middleware
// sends to PostgreSQL per request (each one network round trip once the
// statements are prepared on the connection): in lease mode two for a first
// execution (Claim, Complete) and one for a replay (Claim finds the stored
// outcome), as the package documentation says, and with WithReplayFastPath
// three for a first execution (the SELECT finds nothing, Claim, Complete)
// and one for a replay (the SELECT); in transactional mode two for a first
// execution (the claim batch, which begins the transaction, and the
// completion batch, which commits it) and one for a replay (the claim
// batch, which leaves no transaction to roll back), with WithReplayFastPath
// three (the SELECT, then both batches) and one (the SELECT), and four for both on a
// session that does not default to read committed (the claim batch that
// finds so, BEGIN, the claim, COMMIT or ROLLBACK). Once nearly every claim
// of a window acquired, a lease-mode claim begins with the upsert
// statement and a transactional one with a plain INSERT: two for a first
// execution still, and two for a replay (the upsert, which finds the
// completed row, then the claim statement; the INSERT that inserts
// nothing, then ROLLBACK with the claim batch).
func TestMiddlewareRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		mode          string
		first, replay int64
	}{
		{"lease", 2, 1},
		{"lease-upsert-first", 2, 2},
		{"lease-fast-replay", 3, 1},
		{"tx", 2, 1},
		{"tx-fast-replay", 3, 1},
		{"tx-insert-first", 2, 2},
		{"tx-repeatable-read-session", 4, 4},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			rt := &roundTrips{}
			// One connection, so that the warm-up prepares the statements
			// on the connection the counted requests use.
			pool := newPool(t, func(c *pgxpool.Config) {
				c.ConnConfig.Tracer = rt
				c.MaxConns = 1
				if tc.mode == "tx-repeatable-read-session" {
					c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
				}
			})
			table := uniqueTable(t, pool)
			var s idempotency.Store = pgstore.New(pool, pgstore.WithTable(table))
			if tc.mode == "lease-fast-replay" {
				s = pgstore.New(pool, pgstore.WithTable(table), pgstore.WithReplayFastPath())
			}
			if err := pgstore.New(pool, pgstore.WithTable(table)).CreateSchema(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.mode == "tx-fast-replay":
				s = pgstore.NewTx(pool, pgstore.WithTable(table), pgstore.WithReplayFastPath())
			case strings.HasPrefix(tc.mode, "tx"):
				s = pgstore.NewTx(pool, pgstore.WithTable(table))
			}
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"id":"ord_1"}`))
			}))
			serve := func(key, wantReplayed string) {
				t.Helper()
				r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"amount":5}`))
				r = r.WithContext(ctxT(t))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(idempotency.HeaderIdempotencyKey, key)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != wantReplayed {
					t.Fatalf("key %s: answered %d replayed=%q %s", key, w.Code, w.Header().Get(idempotency.HeaderReplayed), w.Body)
				}
			}
			// Warm up: prepare every statement on the one connection.
			if tc.mode == "lease-upsert-first" || tc.mode == "tx-insert-first" {
				// A window of first executions, which turns the upsert or
				// the plain INSERT on.
				for i := range 64 {
					serve("warm-"+strconv.Itoa(i), "")
				}
				on := false
				switch s := s.(type) {
				case *pgstore.Store:
					on = pgstore.UpsertsFirst(s)
				case *pgstore.TxStore:
					on = pgstore.InsertsFirst(s)
				}
				if !on {
					t.Fatal("a window of first executions did not turn the statement that only inserts on")
				}
			}
			serve("warm", "")
			serve("warm", "true")

			for _, step := range []struct {
				name     string
				replayed string
				want     int64
			}{
				{"first execution", "", tc.first},
				{"replay", "true", tc.replay},
			} {
				before := rt.n.Load()
				serve("counted", step.replayed)
				if n := rt.n.Load() - before; n != step.want {
					t.Errorf("%s mode, %s: %d round trips to PostgreSQL, want %d", tc.mode, step.name, n, step.want)
				}
			}
		})
	}
}
