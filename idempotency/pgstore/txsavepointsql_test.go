package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerSavepointsAsSQL: savepoints that a handler sends as SQL
// stay within the request's transaction. ROLLBACK TO SAVEPOINT, whose tag
// is ROLLBACK, is checked (one round trip) and found harmless: the request
// commits what it kept, once. A RELEASE of pgx's savepoint under pgx's
// feet makes pgx's rollback to it fail, which fails the transaction:
// nothing is committed, the client gets 503 and the retry runs.
func TestTxHandlerSavepointsAsSQL(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(ctx context.Context, tx pgx.Tx, biz string) error
		kept bool
	}{
		{"ROLLBACK TO SAVEPOINT", func(ctx context.Context, tx pgx.Tx, biz string) error {
			for _, sql := range []string{"SAVEPOINT a", `INSERT INTO "` + biz + `" (id) VALUES ('dropped')`, "ROLLBACK TO SAVEPOINT a", "RELEASE SAVEPOINT a"} {
				if _, err := tx.Exec(ctx, sql); err != nil {
					return err
				}
			}
			return nil
		}, true},
		{"RELEASE of pgx's savepoint", func(ctx context.Context, tx pgx.Tx, biz string) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT sp_1"); err != nil {
				return err
			}
			return sp.Rollback(ctx)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, s, biz, ctx := newBizTxStore(t)
			var runs atomic.Int64
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				tx, _ := pgstore.TxFromContext(r.Context())
				if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
					t.Error(err)
				}
				if n == 1 {
					if err := c.run(r.Context(), tx, biz); (err == nil) != c.kept {
						t.Errorf("the handler's savepoints: %v", err)
					}
				}
				w.WriteHeader(http.StatusCreated)
			}))
			send := func() *httptest.ResponseRecorder { return postPayment(ctx, h, "savepoints") }
			first, retry := send(), send()
			wantFirst, wantRuns := http.StatusCreated, int64(1)
			if !c.kept {
				wantFirst, wantRuns = http.StatusServiceUnavailable, 2
			}
			if first.Code != wantFirst || retry.Code != http.StatusCreated || runs.Load() != wantRuns {
				t.Errorf("answers %d and %d after %d runs; want %d, 201 and %d runs", first.Code, retry.Code, runs.Load(), wantFirst, wantRuns)
			}
			if n := bizRows(t, pool, biz); n != 1 {
				t.Errorf("%d business rows; want 1", n)
			}
		})
	}
}
