package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerEndsBlockOnReadOnlySession: on sessions that default to
// read only (default_transaction_read_only, an operator's or a handler's
// committed with an earlier request), the claim begins its transaction
// READ WRITE; a handler's COMMIT then committed the claim in progress
// with its write, and the statement that records such a claim as
// completed but not replayable ran outside any block, read only: it
// failed, the claim stayed in progress, and the retry took the key over
// and ran the handler, and wrote, again. So did the settling of a COMMIT
// cut short by its context, on another connection of the pool. Either
// must record the claim, and the retry get 410.
func TestTxHandlerEndsBlockOnReadOnlySession(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(fmt.Sprint("cut short ", cut), func(t *testing.T) { testTxHandlerEndsBlockOnReadOnlySession(t, cut) })
	}
}

func testTxHandlerEndsBlockOnReadOnlySession(t *testing.T, cut bool) {
	setup := newPool(t)
	table := newTxStore(t, setup).Table()
	ro := newPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on" })
	s := pgstore.NewTx(ro, pgstore.WithTable(table))
	t.Cleanup(func() { _ = s.Close() })
	biz, ctx := bizTable(t, setup, s), ctxT(t)
	if cut {
		// As in TestTxHandlerCommitCutShort: the COMMIT commits 300 ms
		// after pgx's cancel request.
		slowCommits(t, setup, biz, 0.5, 0.3)
	}
	var runs atomic.Int64
	var commitErr error // the handler's COMMIT's, read once the first request ended
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		tx, _ := pgstore.TxFromContext(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
			t.Error(err)
		}
		if n == 1 {
			cctx, cancel := context.WithTimeout(r.Context(), time.Minute)
			if cut {
				cctx, cancel = context.WithTimeout(r.Context(), 100*time.Millisecond)
			}
			_, commitErr = tx.Exec(cctx, "COMMIT")
			cancel()
		}
		w.WriteHeader(http.StatusCreated)
	}))
	send := func() *httptest.ResponseRecorder { return postPayment(ctx, h, "ends-block-read-only") }
	if first := send(); first.Code != http.StatusServiceUnavailable {
		t.Errorf("the request whose handler sent COMMIT answered %d: %s; want 503", first.Code, first.Body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for bizRows(t, setup, biz) == 0 {
		if time.Now().After(deadline) {
			if cut {
				// The cancel reached the COMMIT before the trigger's
				// handler could catch it (a loaded machine), and the
				// COMMIT rolled back: the case this test is about, a
				// COMMIT cut short that still commits, did not happen.
				t.Skipf("the COMMIT cut short rolled back on this run (%v); the premise of this case did not hold", commitErr)
			}
			t.Fatal("the handler's COMMIT never committed; the test's premise is gone")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(commitErr, pgstore.ErrHandlerEndedTx) {
		t.Errorf("the handler's COMMIT = %v; want ErrHandlerEndedTx (it committed)", commitErr)
	}
	retry := send()
	if runs.Load() != 1 || retry.Code != http.StatusGone {
		t.Errorf("the retry answered %d after %d runs; want 410 and one run: the first run's write was committed", retry.Code, runs.Load())
	}
	if n := bizRows(t, setup, biz); n != 1 {
		t.Errorf("%d business rows; want 1", n)
	}
}
