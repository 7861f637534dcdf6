package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// tooLargeLimit is the bound on a completion's bytes the tests below set,
// in place of PostgreSQL's 1 GB.
const tooLargeLimit = 1000

// refuseLargeOutcomes makes PostgreSQL itself refuse, as it refuses a value
// or a message over its limit, a completion of table whose body and header
// take more than tooLargeLimit bytes: a trigger raises
// program_limit_exceeded (54000).
func refuseLargeOutcomes(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	fn := table + "_too_large"
	if _, err := pool.Exec(ctxT(t), fmt.Sprintf(`
CREATE FUNCTION "%[1]s"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF coalesce(octet_length(NEW.body), 0) + coalesce(octet_length(NEW.header_bin), 0) > %[3]d THEN
		RAISE EXCEPTION 'simulated: value too large' USING ERRCODE = '54000';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER "%[1]s" BEFORE UPDATE ON "%[2]s" FOR EACH ROW EXECUTE FUNCTION "%[1]s"()`, fn, table, tooLargeLimit)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP FUNCTION IF EXISTS "`+fn+`"() CASCADE`) })
}

// TestTxAnswerTooLargeIsGone: in transactional mode an answer too large for
// PostgreSQL failed the completion batched with the COMMIT, so the
// transaction rolled back with the handler's writes, the client got 503,
// and every retry ran the handler again and failed the same way. Now the
// store refuses such an answer in Go before sending it
// (ErrResponseNotStorable), and the Middleware stores it as completed but
// not replayable in the same transaction, as in lease mode: the handler's
// writes commit once, its client gets its answer, and a retry gets 410.
func TestTxAnswerTooLargeIsGone(t *testing.T) {
	pgstore.SetMaxOutcomeBytes(t, tooLargeLimit)
	pool, s, biz, ctx := newBizTxStore(t)
	refuseLargeOutcomes(t, pool, s.Table())
	body := strings.Repeat("b", 4*tooLargeLimit)
	var runs atomic.Int64
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		tx, _ := pgstore.TxFromContext(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(body))
	}))
	send := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`)).WithContext(ctx)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderIdempotencyKey, "too-large")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := send()
	if first.Code != http.StatusCreated || first.Body.String() != body {
		t.Errorf("first request = %d (%.80q), want 201 and the handler's body", first.Code, first.Body)
	}
	retry := send()
	if retry.Code != http.StatusGone {
		t.Errorf("retry = %d (%.200q), want 410 (completed, not replayable)", retry.Code, retry.Body)
	}
	if n, rows := runs.Load(), bizRows(t, pool, biz); n != 1 || rows != 1 {
		t.Errorf("handler ran %d times, %d business rows committed; want 1 and 1", n, rows)
	}
}

// TestTxCompleteRefusesTooLarge: Tx.Complete refuses an answer over the
// bound with ErrResponseNotStorable and keeps nothing of it, so that a
// not-replayable outcome can be stored in its place in the same
// transaction; one at the bound is kept byte for byte.
func TestTxCompleteRefusesTooLarge(t *testing.T) {
	pgstore.SetMaxOutcomeBytes(t, tooLargeLimit)
	pool := newPool(t)
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	k := key("tx-too-large")
	tx, r := beginClaim(t, s, k, "fp")
	big := idempotency.Response{Status: 201, Body: bytes.Repeat([]byte{'x'}, tooLargeLimit)}
	if err := tx.Complete(ctx, k, r.Token, big, time.Hour); !errors.Is(err, idempotency.ErrResponseNotStorable) {
		t.Fatalf("Tx.Complete of a %d-byte body, over a bound of %d with its header, scope and key = %v, want ErrResponseNotStorable", len(big.Body), tooLargeLimit, err)
	}
	if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Oversize: true}, time.Hour); err != nil {
		t.Fatalf("Tx.Complete as not replayable after the refusal: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if e, found, err := s.Get(ctx, k); err != nil || !found || e.State != idempotency.StateCompleted || e.Response == nil || !e.Response.Oversize {
		t.Fatalf("Get = %+v, %v, %v; want completed, not replayable", e, found, err)
	}

	k = key("tx-at-bound")
	tx, r = beginClaim(t, s, k, "fp")
	// The stamped header takes 8 bytes, scope and key the rest.
	fits := idempotency.Response{Status: 201, Body: bytes.Repeat([]byte{'y'}, tooLargeLimit-8-len(k.Scope)-len(k.Key))}
	if err := tx.Complete(ctx, k, r.Token, fits, time.Hour); err != nil {
		t.Fatalf("Tx.Complete at the bound: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if e, _, err := s.Get(ctx, k); err != nil || e.Response == nil || !bytes.Equal(e.Response.Body, fits.Body) {
		t.Fatalf("Get = %+v, %v; want the body at the bound", e, err)
	}
}

// TestCompleteRefusesTooLarge: lease mode's Complete refuses an answer over
// the bound before sending it, and changes nothing. Over PostgreSQL's own
// bound pgx refuses to send the message, with an error that is no
// *pgconn.PgError, so the database's refusal (54000) was never seen: the
// Middleware retried the Complete until its store timeout, and the claim
// stayed in progress until its lease lapsed, when a retry ran the handler
// again.
func TestCompleteRefusesTooLarge(t *testing.T) {
	pgstore.SetMaxOutcomeBytes(t, tooLargeLimit)
	s := newStore(t, newPool(t))
	ctx := ctxT(t)
	k := key("lease-too-large")
	r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	big := idempotency.Response{Status: 201, Header: http.Header{"Location": {strings.Repeat("l", tooLargeLimit)}}}
	if err := s.Complete(ctx, k, r.Token, big, time.Hour); !errors.Is(err, idempotency.ErrResponseNotStorable) {
		t.Fatalf("Complete of a header over the bound = %v, want ErrResponseNotStorable", err)
	}
	if e, _, err := s.Get(ctx, k); err != nil || e.State != idempotency.StateInProgress || e.Token != r.Token {
		t.Fatalf("after the refused Complete Get = %+v, %v; want the claim as it was", e, err)
	}
}
