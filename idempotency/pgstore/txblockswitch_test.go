package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerSwitchesTheBlock: a handler that ends the request's
// transaction block and begins another in one go ("COMMIT; BEGIN" in one
// query string, COMMIT AND CHAIN, the two as a batch, or through the
// transaction's Conn) left the transaction status in a block, so nothing
// noticed: the claim and the writes before it committed in progress, a
// retry could take the key over meanwhile, and the Middleware's completion
// ran in the new block, storing 201 as if the writes had committed with
// it. Now the completion checks that the claim's row was written by the
// transaction it commits (its xmin), and a statement sent through the
// transaction whose tag is transaction control is checked at once: the
// request gets a problem, the writes after the switch are rolled back,
// and the key is recorded as completed but not replayable (410) when the
// claim was committed, or left free (the retry runs) when it was rolled
// back; so is a request whose handler answers 500 after a switch caught
// late, whose rollback left the claim committed in progress, for a retry
// to take over and run again. The cases run directly and through PgBouncer
// (SAFERETRY_PGBOUNCER_URL), see switchTargets.
func TestTxHandlerSwitchesTheBlock(t *testing.T) {
	execSQL := func(sql string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, sql)
			return err
		}
	}
	batch := func(ctx context.Context, tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("COMMIT")
		b.Queue("BEGIN")
		return tx.SendBatch(ctx, b).Close()
	}
	throughConn := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Conn().Exec(ctx, "COMMIT; BEGIN")
		return err
	}
	for _, c := range []switchCase{
		{"COMMIT; BEGIN in one Exec", execSQL("COMMIT; BEGIN"), true, true, false},
		{"COMMIT AND CHAIN", execSQL("COMMIT AND CHAIN"), true, true, false},
		{"END; START TRANSACTION in one Exec", execSQL("END; START TRANSACTION"), true, true, false},
		{"ROLLBACK; BEGIN in one Exec", execSQL("ROLLBACK; BEGIN"), false, true, false},
		{"COMMIT and BEGIN as a batch", batch, true, false, false},
		{"COMMIT and BEGIN as a batch, answers 500", batch, true, false, true},
		{"COMMIT; BEGIN through Conn", throughConn, true, false, false},
		{"COMMIT; BEGIN through Conn, answers 500", throughConn, true, false, true},
	} {
		for target, tg := range execTargets(t) {
			if !switchTargets[target] {
				continue
			}
			t.Run(c.name+"/"+target, func(t *testing.T) { testTxHandlerSwitchesTheBlock(t, tg, c) })
		}
	}
}

// switchTargets are the exec targets (see execTargets) that
// TestTxHandlerSwitchesTheBlock runs its cases on: pgx's default mode,
// the simple protocol (which sends a batch as one query string), and
// PgBouncer.
var switchTargets = map[string]bool{
	"direct/" + modeName(pgx.QueryExecModeCacheStatement):    true,
	"direct/" + modeName(pgx.QueryExecModeSimpleProtocol):    true,
	"pgbouncer/" + modeName(pgx.QueryExecModeExec):           true,
	"pgbouncer/" + modeName(pgx.QueryExecModeSimpleProtocol): true,
}

// switchCase is a case of TestTxHandlerSwitchesTheBlock.
type switchCase struct {
	name      string
	end       func(context.Context, pgx.Tx) error
	committed bool
	// atOnce: the handler's statement itself fails with
	// ErrHandlerEndedTx, and the write after it is refused.
	atOnce bool
	// answers500: the handler answers 500 after the statement, so that
	// the request's transaction is rolled back rather than committed.
	answers500 bool
}

// testTxHandlerSwitchesTheBlock runs c on tg.
func testTxHandlerSwitchesTheBlock(t *testing.T, tg pgTarget, c switchCase) {
	pool := tg.newPool(t)
	s := tg.txStore(t, pool)
	biz, ctx := bizTable(t, pool, s), ctxT(t)
	var runs atomic.Int64
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		tx, _ := pgstore.TxFromContext(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("before-", n)); err != nil {
			t.Error(err)
		}
		if n == 1 {
			err := c.end(r.Context(), tx)
			_, afterErr := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ('after')`)
			if c.atOnce && !errors.Is(err, pgstore.ErrHandlerEndedTx) {
				t.Errorf("the handler's statement = %v; want ErrHandlerEndedTx", err)
			}
			if c.atOnce && afterErr == nil {
				t.Error("a statement after the handler's succeeded")
			}
			if c.answers500 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	send := func() *httptest.ResponseRecorder { return postPayment(ctx, h, "handler-switches-block") }
	first := send()
	if first.Code < 500 || !c.answers500 && first.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("the request answered %d (%q); want a problem (5xx)", first.Code, first.Header().Get("Content-Type"))
	}
	retry := send()
	if c.committed {
		if runs.Load() != 1 || retry.Code != http.StatusGone {
			t.Errorf("the retry answered %d after %d runs; want 410 and one run: the first run's write was committed", retry.Code, runs.Load())
		}
	} else if runs.Load() != 2 || retry.Code != http.StatusCreated {
		t.Errorf("the retry answered %d after %d runs; want 201 and a second run: nothing of the first was committed", retry.Code, runs.Load())
	}
	var after int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM "`+biz+`" WHERE id = 'after'`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if n := bizRows(t, pool, biz); n != 1 || after != 0 {
		t.Errorf("%d business rows (%d written after the switch); want 1, the write before it (or the second run's)", n, after)
	}
}
