package pgledger_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/tracelog"

	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// countSends returns a tracer that counts into n the queries and batches a
// pool sends, from pgx's own tracelog, which logs each once when done, as
// "Query" or "BatchClose"; with statements already prepared on the
// connection, each is one round trip.
func countSends(n *atomic.Int64) *tracelog.TraceLog {
	return &tracelog.TraceLog{LogLevel: tracelog.LogLevelInfo, Logger: tracelog.LoggerFunc(
		func(_ context.Context, _ tracelog.LogLevel, msg string, _ map[string]any) {
			if msg == "Query" || msg == "BatchClose" {
				n.Add(1)
			}
		})}
}

// Pay is one round trip whatever it answers, in its own transaction and in
// the caller's.
func TestPayRoundTrips(t *testing.T) {
	var sent atomic.Int64
	pool := newPool(t, func(c *pgxpool.Config) {
		c.MaxConns = 1 // one connection, whose statements the warm-up prepares
		c.ConnConfig.Tracer = countSends(&sent)
	})
	l := pgledger.New(pool, newTable(t, pool), map[string]int64{"EUR": 100})
	ctx := ctxT(t)
	measure := func(name string, ctx context.Context, ref string, amount int64) {
		t.Helper()
		before := sent.Load()
		_, _, err := l.Pay(ctx, ref, 0, payment("pay_"+name, amount, "EUR"))
		if n := sent.Load() - before; n != 1 {
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
