package pgstore_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerCommitIsRefused: a handler written with pgx's usual idiom
// (defer tx.Rollback, tx.Commit at the end) on the transaction from
// TxFromContext. Its Commit was passed through: the business write and
// the claim, still in progress, committed without the answer, the request
// got 503, and the retry ran the handler, and wrote, again. Now Commit is
// refused with ErrHandlerCommit and commits nothing, and the deferred
// Rollback after it does nothing: a handler that goes on to answer 201
// has its write committed with the answer, once; one that answers 500 on
// the error has nothing committed. Found by a review helper.
func TestTxHandlerCommitIsRefused(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   func(commitErr error) int
		wantRows int
	}{
		{"answers 201", func(error) int { return http.StatusCreated }, 1},
		{"answers 500 on the error", func(err error) int {
			if err != nil {
				return http.StatusInternalServerError
			}
			return http.StatusCreated
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, s, biz, ctx := newBizTxStore(t)
			var runs atomic.Int64
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				tx, ok := pgstore.TxFromContext(r.Context())
				if !ok {
					t.Error("no transaction in the handler's context")
					return
				}
				defer tx.Rollback(r.Context())
				if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
					t.Error(err)
					return
				}
				err := tx.Commit(r.Context())
				if !errors.Is(err, pgstore.ErrHandlerCommit) {
					t.Errorf("the handler's Commit = %v, want ErrHandlerCommit", err)
				}
				w.WriteHeader(c.status(err))
			}))
			send := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`)).WithContext(ctx)
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(idempotency.HeaderIdempotencyKey, "handler-commits")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			first, retry := send(), send()
			if rows := bizRows(t, pool, biz); rows != c.wantRows {
				t.Errorf("%d business rows after answers %d and %d (%d runs), want %d", rows, first.Code, retry.Code, runs.Load(), c.wantRows)
			}
			if c.wantRows == 1 && (runs.Load() != 1 || retry.Header().Get(idempotency.HeaderReplayed) != "true") {
				t.Errorf("%d runs, the retry answered %d (replayed %q); want one run and the replay",
					runs.Load(), retry.Code, retry.Header().Get(idempotency.HeaderReplayed))
			}
		})
	}
}
