package pgledger_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// sends counts the queries and batches a pool sends; with statements
// already prepared on the connection, each is one round trip.
type sends struct{ n atomic.Int64 }

func (s *sends) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *sends) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *sends) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *sends) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *sends) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// Pay is one round trip whatever it answers, in its own transaction and in
// the caller's.
func TestPayRoundTrips(t *testing.T) {
	var s sends
	pool := newPool(t, func(c *pgxpool.Config) {
		c.MaxConns = 1 // one connection, whose statements the warm-up prepares
		c.ConnConfig.Tracer = &s
	})
	l := pgledger.New(pool, newTable(t, pool), map[string]int64{"EUR": 100})
	ctx := ctxT(t)
	measure := func(name string, ctx context.Context, ref string, amount int64) {
		t.Helper()
		before := s.n.Load()
		_, _, err := l.Pay(ctx, ref, 0, payment("pay_"+name, amount, "EUR"))
		if n := s.n.Load() - before; n != 1 {
			t.Errorf("%s: Pay sent %d round trips (%v), want 1", name, n, err)
		}
	}
	if _, _, err := l.Pay(ctx, "warm-up", 0, payment("pay_warm", 1, "EUR")); err != nil {
		t.Fatal(err)
	}
	measure("new", ctx, "ref", 10)
	measure("found", ctx, "ref", 10)
	measure("short", ctx, "short", 1000)

	hctx, tx := joined(t, pool)
	if _, _, err := l.Pay(hctx, "warm-up-tx", 0, payment("pay_warm_tx", 1, "EUR")); err != nil {
		t.Fatal(err)
	}
	measure("new in tx", hctx, "ref-tx", 10)
	measure("found in tx", hctx, "ref-tx", 10)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := l.Balance(ctx, "EUR"); err != nil || b != 100-1-10-1-10 {
		t.Errorf("Balance(EUR) = %d, %v; want %d", b, err, 100-1-10-1-10)
	}
}
