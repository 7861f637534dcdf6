package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerSetsTransaction: a handler that changes the characteristics
// of the request's transaction or of its session through the transaction
// (SET TRANSACTION, SET SESSION CHARACTERISTICS, default_transaction_...)
// must not get its writes kept without the answer, nor leave the
// connection unusable for the store's next requests on it. SET
// TRANSACTION READ ONLY makes the completion fail: nothing is committed,
// the client gets 503 and the retry runs. An isolation level set after
// the claim is refused by PostgreSQL, with the same outcome. A session
// made read only by default (committed with the request) made every later
// claim on that connection, back in the pool, fail ("cannot execute
// INSERT in a read-only transaction"); the claim now begins its
// transaction READ WRITE when the session defaults to read only.
func TestTxHandlerSetsTransaction(t *testing.T) {
	for _, c := range []struct {
		sql string
		// kept: the request commits (its answer and writes), else it
		// fails and its retry runs.
		kept bool
	}{
		{"SET TRANSACTION READ ONLY", false},
		{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", false},
		{"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", true},
		{"SET default_transaction_read_only = on", true},
		{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ", true},
	} {
		t.Run(c.sql, func(t *testing.T) {
			pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
			s := newTxStore(t, pool)
			biz, ctx := bizTable(t, pool, s), ctxT(t)
			// Before the tables are dropped, on the one connection.
			t.Cleanup(func() { pool.Exec(context.Background(), "RESET ALL") })
			var runs atomic.Int64
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				tx, _ := pgstore.TxFromContext(r.Context())
				if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
					t.Error(err)
				}
				if n == 1 {
					tx.Exec(r.Context(), c.sql) // its error, if any, is what the commit meets
				}
				w.WriteHeader(http.StatusCreated)
			}))
			send := func(key string) *httptest.ResponseRecorder { return postPayment(ctx, h, key) }
			first := send("sets")
			if c.kept != (first.Code == http.StatusCreated) {
				t.Errorf("the request that sent %q answered %d: %s", c.sql, first.Code, first.Body)
			}
			retry := send("sets")
			if retry.Code != http.StatusCreated {
				t.Errorf("its retry answered %d: %s; want 201", retry.Code, retry.Body)
			}
			for i := range 2 {
				if w := send(fmt.Sprint("later-", i)); w.Code != http.StatusCreated {
					t.Errorf("a later request on the connection answered %d: %s; want 201", w.Code, w.Body)
				}
			}
			wantRuns := int64(3)
			if !c.kept {
				wantRuns = 4
			}
			if n := bizRows(t, pool, biz); n != 3 || runs.Load() != wantRuns {
				t.Errorf("%d business rows after %d runs; want %d runs, each of whose answers was kept, and only those", n, runs.Load(), wantRuns)
			}
		})
	}
}
