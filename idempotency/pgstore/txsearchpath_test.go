package pgstore_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerSearchPathLeftOut: the store's statements run in the
// request's transaction under the settings in force when they run, the
// completion after the handler included. A handler that leaves a SET
// LOCAL search_path without the store's table in force fails its request
// with a 503, everything rolled back, so that a retry runs it again; with
// the table named with its schema (WithTable), the completion finds it
// and a retry is replayed.
func TestTxHandlerSearchPathLeftOut(t *testing.T) {
	for _, qualified := range []bool{false, true} {
		name := map[bool]string{false: "unqualified", true: "qualified"}[qualified]
		t.Run(name, func(t *testing.T) {
			pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 2 })
			table := uniqueTable(t, pool)
			if qualified {
				table = "public." + table
			}
			s := newTxStore(t, pool, pgstore.WithTable(table))
			ctx := ctxT(t)
			var runs atomic.Int64
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				tx, _ := pgstore.TxFromContext(r.Context())
				if _, err := tx.Exec(r.Context(), "SET LOCAL search_path = pg_catalog"); err != nil {
					t.Error(err)
				}
				w.WriteHeader(http.StatusCreated)
			}))
			first := postPayment(ctx, h, "search-path-"+name)
			again := postPayment(ctx, h, "search-path-"+name)
			switch {
			case qualified && (first.Code != http.StatusCreated || again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" || runs.Load() != 1):
				t.Errorf("answers %d, %d (replayed %q) after %d runs; want 201, then 201 replayed, one run", first.Code, again.Code, again.Header().Get("Idempotent-Replayed"), runs.Load())
			case !qualified && (first.Code != http.StatusServiceUnavailable || again.Code != http.StatusServiceUnavailable || runs.Load() != 2):
				t.Errorf("answers %d, %d after %d runs; want 503 each, two runs (the first rolled back)", first.Code, again.Code, runs.Load())
			}
		})
	}
}
