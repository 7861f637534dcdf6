package pgstore_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerDeallocatesOneUnderItsSearchPath: a handler's DEALLOCATE
// of a statement of its own, through the transaction, on the connection's
// second request, under a SET LOCAL search_path that leaves out the
// store's table (a tenant's schema; put back before the commit), is
// followed by forgetting that one statement only: nothing of the store's
// is prepared then, inside the handler's transaction and under its
// search_path. Looking up the store's statements by preparing them
// (forgetOne), with each attempt of the claim batch preparing only its
// own, parsed the claim statements that the connection had not used yet
// there: the table was not found, the DEALLOCATE failed with the
// handler's transaction, and the request.
func TestTxHandlerDeallocatesOneUnderItsSearchPath(t *testing.T) {
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	var runs atomic.Int64
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 2 {
			tx, _ := pgstore.TxFromContext(r.Context())
			ctx := r.Context()
			if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog"); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Prepare(ctx, "mine", "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			prepared := func() (n int) {
				t.Helper()
				if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := prepared()
			if _, err := tx.Exec(ctx, "DEALLOCATE mine"); err != nil {
				t.Errorf("the handler's DEALLOCATE: %v", err)
				return
			}
			if after := prepared(); after != before-1 {
				t.Errorf("%d statements prepared after the handler's DEALLOCATE of one of %d; want %d", after, before, before-1)
			}
			// The completion's statement is parsed again under the
			// search_path of its execution (PostgreSQL re-parses a
			// prepared statement whose search_path changed).
			if _, err := tx.Exec(ctx, "SET LOCAL search_path TO DEFAULT"); err != nil {
				t.Fatal(err)
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	for i := range 3 {
		if w := postPayment(ctx, h, fmt.Sprint("deallocates-under-its-search-path-", i)); w.Code != http.StatusCreated {
			t.Errorf("request %d answered %d: %s; want 201", i, w.Code, w.Body)
		}
	}
}
