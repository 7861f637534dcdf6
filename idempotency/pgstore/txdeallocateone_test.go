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

// TestTxHandlerDeallocatesOne: a handler's DEALLOCATE of one statement,
// through the transaction, made the Tx forget every prepared statement of
// the connection, on both sides (DEALLOCATE ALL): the handler's others, a
// pgx one (Prepare) and an SQL one (PREPARE), were gone, and their next
// use failed. Only the one named is forgotten now.
func TestTxHandlerDeallocatesOne(t *testing.T) {
	_, s, _, ctx := newBizTxStore(t)
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := pgstore.TxFromContext(r.Context())
		ctx := r.Context()
		for _, name := range []string{"dropped", "kept"} {
			if _, err := tx.Prepare(ctx, name, "SELECT $1::int + 1"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tx.Exec(ctx, "PREPARE kept_sql AS SELECT 2"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "DEALLOCATE dropped"); err != nil {
			t.Fatalf("the handler's DEALLOCATE: %v", err)
		}
		var n int
		if err := tx.QueryRow(ctx, "kept", 1).Scan(&n); err != nil || n != 2 {
			t.Errorf("the handler's other statement, prepared through pgx = %d, %v; want 2", n, err)
		}
		if err := tx.QueryRow(ctx, "EXECUTE kept_sql").Scan(&n); err != nil || n != 2 {
			t.Errorf("the handler's statement prepared with PREPARE = %d, %v; want 2", n, err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if w := postPayment(ctx, h, "deallocates-one"); w.Code != http.StatusCreated {
		t.Errorf("the request answered %d: %s; want 201", w.Code, w.Body)
	}
}

// TestTxHandlerDeallocatesOneOfTheStore: a handler's DEALLOCATE of one of
// the statements that the Tx prepared on its connection (named as pgx
// names them, here read from pg_prepared_statements), on the connection's
// second request, is forgotten on the pgx side too: the request commits,
// and so does the next on the connection. A pin: it passed when every
// statement was forgotten.
func TestTxHandlerDeallocatesOneOfTheStore(t *testing.T) {
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	var runs atomic.Int64
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 2 {
			tx, _ := pgstore.TxFromContext(r.Context())
			var name string
			if err := tx.QueryRow(r.Context(), "SELECT name FROM pg_prepared_statements WHERE statement = 'COMMIT'").Scan(&name); err != nil {
				t.Fatalf("the store's COMMIT statement: %v", err)
			}
			if _, err := tx.Exec(r.Context(), `DEALLOCATE "`+name+`"`); err != nil {
				t.Fatalf("the handler's DEALLOCATE: %v", err)
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	for i := range 3 {
		if w := postPayment(ctx, h, fmt.Sprint("deallocates-the-store's-", i)); w.Code != http.StatusCreated {
			t.Errorf("request %d answered %d: %s; want 201", i, w.Code, w.Body)
		}
	}
}

// TestTxHandlerDeallocatesACachedOne: a handler's DEALLOCATE of a
// statement that pgx prepared for its statement cache (the pool's default
// exec mode), which pgx keys by its text, not its name: the Tx sent a
// Close for the name, and pgx's cache still held the statement, so that
// the next use of the same text failed ("prepared statement ... does not
// exist") and failed the request's transaction. When every statement was
// forgotten, the cache was emptied with them.
func TestTxHandlerDeallocatesACachedOne(t *testing.T) {
	_, s, _, ctx := newBizTxStore(t)
	const sql = "SELECT $1::int + 41"
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := pgstore.TxFromContext(r.Context())
		ctx := r.Context()
		var n int
		if err := tx.QueryRow(ctx, sql, 1).Scan(&n); err != nil {
			t.Fatal(err)
		}
		var name string
		if err := tx.QueryRow(ctx, "SELECT name FROM pg_prepared_statements WHERE statement = $1", sql).Scan(&name); err != nil {
			t.Fatalf("the statement that pgx cached: %v", err)
		}
		if _, err := tx.Exec(ctx, `DEALLOCATE "`+name+`"`); err != nil {
			t.Fatalf("the handler's DEALLOCATE: %v", err)
		}
		if err := tx.QueryRow(ctx, sql, 1).Scan(&n); err != nil || n != 42 {
			t.Errorf("the same query after the DEALLOCATE of its cached statement %s = %d, %v; want 42", name, n, err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if w := postPayment(ctx, h, "deallocates-a-cached-one"); w.Code != http.StatusCreated {
		t.Errorf("the request answered %d: %s; want 201", w.Code, w.Body)
	}
}

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
