package pgledger_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// bouncerPool returns a pool through PgBouncer in transaction pooling mode
// (SAFERETRY_PGBOUNCER_URL) in the given exec mode, closed at the end of tb.
func bouncerPool(tb testing.TB, mode pgx.QueryExecMode) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.PgBouncerURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = mode
	pool, err := pgxpool.NewWithConfig(ctxT(tb), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// TestRefusedBehindPooler: behind PgBouncer in transaction mode, the exec
// modes it breaks (the default statement cache, DescribeExec) fail with
// `prepared statement "stmtcache_..." already exists` or run another
// client's statement. Like pgstore's Store, the Ledger must refuse them
// with an *pgstore.ExecModeError, before any statement, from every method.
func TestRefusedBehindPooler(t *testing.T) {
	table := newTable(t, newPool(t))
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			l := pgledger.New(bouncerPool(t, mode), table, nil)
			ctx := ctxT(t)
			ops := map[string]func() error{
				"CreateSchema": func() error { return l.CreateSchema(ctx) },
				"Pay": func() error {
					_, _, err := l.Pay(ctx, "ref-"+mode.String(), 0, payment("pay_"+mode.String(), 1, "EUR"))
					return err
				},
				"Payments": func() error { _, err := l.Payments(ctx); return err },
				"Payment":  func() error { _, _, err := l.Payment(ctx, "pay_none"); return err },
				"Balances": func() error { _, err := l.Balances(ctx); return err },
				"Balance":  func() error { _, err := l.Balance(ctx, "EUR"); return err },
				"Reset":    func() error { return l.Reset(ctx) },
			}
			for name, op := range ops {
				// Twice: a statement cache fails on the second run of a
				// statement as often as on the first.
				for range 2 {
					err := op()
					var em *pgstore.ExecModeError
					if !errors.As(err, &em) || !errors.Is(err, pgstore.ErrUnsafeExecMode) {
						t.Errorf("%s through PgBouncer in mode %v: err = %v, want an *pgstore.ExecModeError", name, mode, err)
					}
				}
			}
		})
	}
}

// TestWorksBehindPoolerInExecMode: in the exec modes that PgBouncer in
// transaction mode does not break, the Ledger works through it.
func TestWorksBehindPoolerInExecMode(t *testing.T) {
	table := newTable(t, newPool(t))
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			l := pgledger.New(bouncerPool(t, mode), table, nil)
			ctx := ctxT(t)
			if err := l.Reset(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, _, err := l.Pay(ctx, "ref", 0, payment("pay_"+mode.String()+string(rune('a'+i)), 5, "EUR")); err != nil {
					t.Fatalf("Pay: %v", err)
				}
			}
			ps, err := l.Payments(ctx)
			if err != nil || len(ps) != 1 {
				t.Fatalf("Payments = %d, %v; want 1", len(ps), err)
			}
			if b, err := l.Balance(ctx, "EUR"); err != nil || b != mockserver.DefaultBalance-5 {
				t.Fatalf("Balance = %d, %v", b, err)
			}
		})
	}
}

// TestPayInTransactionNeedsNoSecondConnection: in transactional mode Pay
// runs on the connection of the Middleware's transaction, which the Store
// checked for a pooler. A Ledger whose own check had not run yet (its
// tables made by another instance) must not probe for a pooler then: the
// probe would wait for a second connection, which a pool of one never
// frees while the transaction holds it.
func TestPayInTransactionNeedsNoSecondConnection(t *testing.T) {
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	store, _, table := newTxStore(t, pool, nil)
	fresh := pgledger.New(pool, table, nil) // the default exec mode: checked before its first statement
	srv := mockserver.New(mockserver.WithStore(store), mockserver.WithLedger(fresh))
	defer srv.Close()
	if !srv.Transactional() {
		t.Fatal("the server does not run in transactional mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/payments", strings.NewReader(`{"amount":5,"currency":"EUR","recipient":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", "one-connection")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("payment over a pool of one connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("payment over a pool of one connection = %d, want 201", resp.StatusCode)
	}
}
