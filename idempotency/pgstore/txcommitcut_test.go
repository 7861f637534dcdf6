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

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerCommitCutShort: a handler's forbidden COMMIT, cut short by
// its context while PostgreSQL still ran it (a deferred trigger that
// takes a while and outlives pgx's cancel request, here), made pgx close
// the connection: the transaction
// status stayed "in a block", so nothing noticed that the COMMIT went on
// and committed the claim, in progress, with the handler's write. The
// request answered 503 ("retry: one rolled back runs again"), and the
// retry took the key over and ran the handler, and wrote, again. Now a
// statement of the handler that may have committed (it names COMMIT or
// END) and that closed the connection is settled: the Tx waits, on
// another connection, for that session's transaction to end, and records
// the claim it committed as completed but not replayable (retries get
// 410), as for a COMMIT that was not cut short. It runs directly and
// through PgBouncer.
func TestTxHandlerCommitCutShort(t *testing.T) {
	for _, answers500 := range []bool{false, true} {
		for target, tg := range execTargets(t) {
			if target != "direct/"+modeName(pgx.QueryExecModeCacheStatement) && target != "pgbouncer/"+modeName(pgx.QueryExecModeExec) {
				continue
			}
			t.Run(fmt.Sprint("answers 500 on the error ", answers500, "/", target), func(t *testing.T) {
				testTxHandlerCommitCutShort(t, tg, answers500)
			})
		}
	}
}

// testTxHandlerCommitCutShort runs a case of TestTxHandlerCommitCutShort
// on tg.
func testTxHandlerCommitCutShort(t *testing.T, tg pgTarget, answers500 bool) {
	pool := tg.newPool(t)
	s := tg.txStore(t, pool)
	biz, ctx := bizTable(t, pool, s), ctxT(t)
	// The COMMIT commits 300 ms after pgx's cancel request.
	slowCommits(t, pool, biz, 0.5, 0.3)
	var runs atomic.Int64
	var commitErr error // the handler's COMMIT's, read once the first request ended
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		tx, _ := pgstore.TxFromContext(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
			t.Error(err)
		}
		if n == 1 {
			cctx, cancel := context.WithTimeout(r.Context(), 100*time.Millisecond)
			_, err := tx.Exec(cctx, "COMMIT")
			cancel()
			if err == nil {
				t.Fatal("the handler's COMMIT was not cut short; the test's premise is gone")
			}
			commitErr = err
			if answers500 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	send := func() *httptest.ResponseRecorder { return postPayment(ctx, h, "commit-cut-short") }
	first := send()
	if first.Code < 500 || !answers500 && first.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("the request whose COMMIT was cut short answered %d (%q); want a problem (5xx)", first.Code, first.Header().Get("Content-Type"))
	}
	// The COMMIT goes on without the client: wait for its end.
	deadline := time.Now().Add(5 * time.Second)
	for bizRows(t, pool, biz) == 0 {
		if time.Now().After(deadline) {
			// The cancel reached the COMMIT before the trigger's handler
			// could catch it (a loaded machine), and it rolled back: the
			// case this test is about did not happen.
			t.Skipf("the COMMIT cut short rolled back on this run (%v); the test's premise did not hold", commitErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(commitErr, pgstore.ErrHandlerEndedTx) {
		t.Errorf("the handler's COMMIT cut short = %v; want ErrHandlerEndedTx (it committed)", commitErr)
	}
	retry := send()
	if runs.Load() != 1 || retry.Code != http.StatusGone {
		t.Errorf("the retry answered %d after %d runs; want 410 and one run: the first run's write was committed", retry.Code, runs.Load())
	}
	if n := bizRows(t, pool, biz); n != 1 {
		t.Errorf("%d business rows; want 1", n)
	}
}
