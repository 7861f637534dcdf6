package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
)

// textModeBody is a body under PostgreSQL's 1 GB message limit as bytes,
// but over it as the text pgx sends it in the exec modes that send
// parameters as text: QueryExecModeExec (the text format, "\x" and two hex
// digits a byte) and QueryExecModeSimpleProtocol (that hex quoted into the
// SQL). Those are the modes the documentation asks for behind PgBouncer.
const textModeBody = 1<<29 + 1<<10

// TestCompleteRefusesTooLargeAsText: in the exec modes that send a bytea
// as hex text, a body of half PostgreSQL's limit already makes a message
// pgx will not send ("message body too large", no *pgconn.PgError). The
// size check counted the body's bytes, not what is sent, so Complete sent
// it and failed with an error the Middleware takes for a transient one
// (retried until its store timeout, the claim left in progress, the
// handler run again by a retry once the lease lapses), and Tx.Complete
// kept it for the COMMIT batch, which then failed and rolled back the
// handler's writes (503, and a new run on every retry). Both must refuse
// it as idempotency.ErrResponseNotStorable before sending it.
func TestCompleteRefusesTooLargeAsText(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a body of half a gigabyte")
	}
	pgURL(t)
	body := make([]byte, textModeBody)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(modeName(mode)+"/lease", func(t *testing.T) {
			tg := pgTarget{url: pgURL(t), mode: mode}
			s := tg.store(t, nil)
			ctx := ctxT(t)
			k := key("text-too-large")
			r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || !r.Acquired {
				t.Fatalf("Claim = %+v, %v", r, err)
			}
			err = s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: body}, time.Hour)
			if !errors.Is(err, idempotency.ErrResponseNotStorable) {
				t.Fatalf("Complete of a %d-byte body in %v = %v, want ErrResponseNotStorable", len(body), mode, err)
			}
			if e, _, err := s.Get(ctx, k); err != nil || e.State != idempotency.StateInProgress || e.Token != r.Token {
				t.Fatalf("after the refused Complete Get = %+v, %v; want the claim as it was", e, err)
			}
		})
		t.Run(modeName(mode)+"/tx", func(t *testing.T) {
			tg := pgTarget{url: pgURL(t), mode: mode}
			s := tg.txStore(t, nil)
			ctx := ctxT(t)
			k := key("tx-text-too-large")
			tx, r := beginClaim(t, s, k, "fp")
			err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: body}, time.Hour)
			if !errors.Is(err, idempotency.ErrResponseNotStorable) {
				t.Fatalf("Tx.Complete of a %d-byte body in %v = %v, want ErrResponseNotStorable", len(body), mode, err)
			}
			if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Oversize: true}, time.Hour); err != nil {
				t.Fatalf("Tx.Complete as not replayable after the refusal: %v", err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("Commit: %v", err)
			}
		})
	}
}
