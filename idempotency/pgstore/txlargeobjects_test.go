package pgstore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerLargeObjectsEndWithTheRequest: the LargeObjects of the
// handler's transaction were pgx's, built on the transaction underneath,
// which never learned that the request's commit ended it: kept past the
// handler, they ran their statements on the connection back in the pool,
// outside any transaction (a large object created there committed on its
// own) or in another request's. They work within the request, commit with
// it, and are refused with pgx.ErrTxClosed once it ended.
func TestTxHandlerLargeObjectsEndWithTheRequest(t *testing.T) {
	pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	var oids []uint32
	t.Cleanup(func() {
		for _, oid := range oids {
			pool.Exec(context.Background(), `SELECT lo_unlink($1)`, oid)
		}
	})
	var kept pgx.LargeObjects
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := pgstore.TxFromContext(r.Context())
		kept = tx.LargeObjects()
		oid, err := kept.Create(r.Context(), 0)
		if err != nil {
			t.Errorf("Create in the handler: %v", err)
		} else {
			oids = append(oids, oid)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/objects", strings.NewReader(`{}`)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderIdempotencyKey, "large-objects")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusCreated {
		t.Fatalf("the request answered %d: %s", w.Code, w.Body)
	}
	oid, err := kept.Create(ctx, 0)
	if err == nil {
		oids = append(oids, oid)
	}
	if !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("Create on the LargeObjects kept past the request = %v; want pgx.ErrTxClosed", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_largeobject_metadata WHERE oid = ANY($1::oid[])`, oids).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d of the large objects are committed; want 1, the handler's", n)
	}
}

// TestTxHandlerLargeObjectsEndWithTheBlock: once a handler's statement
// ended the request's transaction block (COMMIT sent as SQL), every later
// statement on the transaction is refused (ErrHandlerEndedTx), so that
// none commits on its own outside it; the LargeObjects taken before it
// were not, and a large object created with them committed on its own.
func TestTxHandlerLargeObjectsEndWithTheBlock(t *testing.T) {
	pool, s, _, ctx := newBizTxStore(t)
	var oids []uint32
	t.Cleanup(func() {
		for _, oid := range oids {
			pool.Exec(context.Background(), `SELECT lo_unlink($1)`, oid)
		}
	})
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := pgstore.TxFromContext(r.Context())
		lo := tx.LargeObjects()
		if _, err := tx.Exec(r.Context(), "COMMIT"); !errors.Is(err, pgstore.ErrHandlerEndedTx) {
			t.Errorf("the handler's COMMIT = %v; want ErrHandlerEndedTx", err)
		}
		oid, err := lo.Create(r.Context(), 0)
		if err == nil {
			oids = append(oids, oid)
			t.Error("a large object was created after the handler's COMMIT, outside the request's transaction")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/objects", strings.NewReader(`{}`)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderIdempotencyKey, "large-objects-commit")
	h.ServeHTTP(httptest.NewRecorder(), req)
}
