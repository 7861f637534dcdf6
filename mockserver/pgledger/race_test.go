package pgledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// waitingPool returns a pool whose sessions carry an application name of
// their own, and a function that waits until one of them waits on a lock of
// the given wait_event ("advisory", "transactionid", ...).
func waitingPool(t *testing.T, admin *pgxpool.Pool) (*pgxpool.Pool, func(event string)) {
	t.Helper()
	name := testenv.RandomName("pgledger_waiter_")
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = name })
	return pool, func(event string) {
		t.Helper()
		testenv.Eventually(t, "Pay waits on a lock of type "+event, func() bool {
			return scalar(t, admin, `SELECT count(*) FROM pg_stat_activity
				WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = $2`, name, event) > 0
		})
	}
}

// joined begins a transaction as the Middleware's transactional mode does
// and returns the context a handler gets.
func joined(t *testing.T, pool *pgxpool.Pool) (context.Context, idempotency.Tx) {
	t.Helper()
	store := pgstore.NewTx(pool) // its table is never used: BeginTx only begins
	t.Cleanup(func() { _ = store.Close() })
	ctx := ctxT(t)
	tx, err := store.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	return tx.Context(ctx), tx
}

// onFreshTable runs f as the subtest name, with a pool of its own and a
// fresh ledger table on it.
func onFreshTable(t *testing.T, name string, f func(t *testing.T, admin *pgxpool.Pool, table string)) {
	t.Run(name, func(t *testing.T) {
		admin := newPool(t)
		f(t, admin, newTable(t, admin))
	})
}

type result struct {
	p     mockserver.Payment
	found bool
	err   error
}

func payAsync(ctx context.Context, l *pgledger.Ledger, ref string, p mockserver.Payment) <-chan result {
	ch := make(chan result, 1)
	go func() {
		got, found, err := l.Pay(ctx, ref, 0, p)
		ch <- result{got, found, err}
	}()
	return ch
}

// A takeover paying while the run it took over holds an uncommitted
// payment under the same ref waits for it: after its commit, the takeover
// finds that payment; after its rollback, it pays.
func TestPayWaitsForTheUncommittedPayment(t *testing.T) {
	testenv.PostgresURL(t)
	for _, commit := range []bool{true, false} {
		onFreshTable(t, map[bool]string{true: "commit", false: "rollback"}[commit], func(t *testing.T, admin *pgxpool.Pool, table string) {
			opening := map[string]int64{"EUR": 1000}
			first := pgledger.New(admin, table, opening)
			hctx, tx := joined(t, admin)
			held, found, err := first.Pay(hctx, "ref", 0, payment("pay_first", 100, "EUR"))
			if err != nil || found {
				t.Fatalf("Pay in the transaction = found %v, %v", found, err)
			}
			pool, waitBlocked := waitingPool(t, admin)
			second := pgledger.New(pool, table, opening)
			ch := payAsync(ctxT(t), second, "ref", payment("pay_second", 100, "EUR"))
			waitBlocked("advisory") // on the ref's lock, before reading anything
			want, wantFound := held, true
			if commit {
				err = tx.Commit(ctxT(t))
			} else {
				err = tx.Rollback(ctxT(t))
				wantFound = false
			}
			if err != nil {
				t.Fatal(err)
			}
			r := <-ch
			if r.err != nil || r.found != wantFound || (wantFound && r.p.ID != want.ID) || (!wantFound && r.p.ID != "pay_second") {
				t.Fatalf("takeover's Pay = %+v, found %v, %v; want found=%v", r.p, r.found, r.err, wantFound)
			}
			mustStored(t, admin, table, 1, 900)
		})
	}
}

// The unique constraint holds when the advisory lock is skipped: a payment
// under the ref inserted by a transaction that took no lock aborts Pay's
// transaction, debit included. On its own, Pay then answers that payment;
// in the caller's transaction it fails, for the caller to roll back.
func TestUniqueRefIsTheBackstop(t *testing.T) {
	testenv.PostgresURL(t)
	for _, inTx := range []bool{false, true} {
		onFreshTable(t, map[bool]string{false: "own transaction", true: "caller's transaction"}[inTx], func(t *testing.T, admin *pgxpool.Pool, table string) {
			ctx := ctxT(t)
			raw := testenv.PostgresTx(t, admin)
			if _, err := raw.Exec(ctx, `INSERT INTO "`+table+`_payments"
				(id, ref, idempotency_key, amount, currency, recipient, status, created)
				VALUES ('pay_raw', 'ref', 'k', 5, 'EUR', 'r', 'succeeded', now())`); err != nil {
				t.Fatal(err)
			}
			pool, waitBlocked := waitingPool(t, admin)
			l := pgledger.New(pool, table, map[string]int64{"EUR": 1000})
			pctx := ctx
			var tx idempotency.Tx
			if inTx {
				pctx, tx = joined(t, pool)
			}
			ch := payAsync(pctx, l, "ref", payment("pay_mine", 100, "EUR"))
			waitBlocked("transactionid") // on the uncommitted ref in the unique index
			if err := raw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-ch
			if inTx {
				if !isUniqueViolation(r.err) {
					t.Fatalf("Pay in the caller's transaction = %+v, %v; want the unique violation", r.p, r.err)
				}
				if err := tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
			} else if r.err != nil || !r.found || r.p.ID != "pay_raw" {
				t.Fatalf("Pay = %+v, found %v, %v; want pay_raw found", r.p, r.found, r.err)
			}
			// The raw payment debited nothing, and Pay's debit was undone.
			mustStored(t, admin, table, 1, -1)
			if b, err := l.Balance(ctx, "EUR"); err != nil || b != 1000 {
				t.Errorf("Balance(EUR) = %d, %v; want 1000", b, err)
			}
		})
	}
}

// mustStored checks the number of payment rows and the stored EUR balance
// (-1: no row).
func mustStored(t *testing.T, pool *pgxpool.Pool, table string, payments, eur int64) {
	t.Helper()
	if n := scalar(t, pool, `SELECT count(*) FROM "`+table+`_payments"`); n != payments {
		t.Errorf("%d payment rows, want %d", n, payments)
	}
	if b := scalar(t, pool, `SELECT coalesce(max(balance), -1) FROM "`+table+`_balances" WHERE currency = 'EUR'`); b != eur {
		t.Errorf("stored EUR balance %d, want %d", b, eur)
	}
}
