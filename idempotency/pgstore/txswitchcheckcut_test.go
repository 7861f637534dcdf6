package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// cancelOnCommitTag is a pgx tracer that calls the function stored in it
// when a statement with the tag COMMIT ends: a context of the handler's
// that ends just after its COMMIT AND CHAIN went through.
type cancelOnCommitTag struct {
	cancel atomic.Pointer[context.CancelFunc]
}

func (c *cancelOnCommitTag) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c *cancelOnCommitTag) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err == nil && data.CommandTag.String() == "COMMIT" {
		if f := c.cancel.Swap(nil); f != nil {
			(*f)()
		}
	}
}

// TestTxHandlerSwitchCheckCut: the check that follows a handler's
// statement tagged as transaction control (COMMIT AND CHAIN, here) ran
// under the statement's context, and one that ended just after the
// statement failed the check before it was sent: nothing was caught, and
// the request, answered 500 and rolled back, rolled back only the block
// the statement began, leaving the claim committed in progress with the
// handler's write; the retry took it over and ran again. Now the check
// is not cut short by the handler's context, and a rollback after such a
// statement looks whether the claim stands committed.
func TestTxHandlerSwitchCheckCut(t *testing.T) {
	for _, answers500 := range []bool{false, true} {
		t.Run(fmt.Sprint("answers 500 ", answers500), func(t *testing.T) {
			tr := &cancelOnCommitTag{}
			pool := newPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = tr })
			s := newTxStore(t, pool)
			biz, ctx := bizTable(t, pool, s), ctxT(t)
			var runs atomic.Int64
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				tx, _ := pgstore.TxFromContext(r.Context())
				if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
					t.Error(err)
				}
				if n == 1 {
					cctx, cancel := context.WithCancel(r.Context())
					tr.cancel.Store(&cancel)
					_, err := tx.Exec(cctx, "COMMIT AND CHAIN")
					cancel()
					if err == nil {
						t.Error("the handler's COMMIT AND CHAIN succeeded")
					}
					if answers500 {
						w.WriteHeader(http.StatusInternalServerError)
						return
					}
				}
				w.WriteHeader(http.StatusCreated)
			}))
			send := func() *httptest.ResponseRecorder { return postPayment(ctx, h, "switch-check-cut") }
			if first := send(); first.Code < 500 {
				t.Errorf("the request answered %d; want 5xx", first.Code)
			}
			retry := send()
			if runs.Load() != 1 || retry.Code != http.StatusGone {
				t.Errorf("the retry answered %d after %d runs; want 410 and one run: the first run's write was committed", retry.Code, runs.Load())
			}
			if n := bizRows(t, pool, biz); n != 1 {
				t.Errorf("%d business rows; want 1", n)
			}
		})
	}
}
