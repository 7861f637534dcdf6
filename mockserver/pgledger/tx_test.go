package pgledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// newTxStore returns a transactional store on a fresh table, with a ledger
// beside it under the same name, as cmd/mockserver pairs them.
func newTxStore(t *testing.T, pool *pgxpool.Pool, opening map[string]int64) (*pgstore.TxStore, *pgledger.Ledger, string) {
	t.Helper()
	table := testenv.RandomName("pgledger_test_")
	store := pgstore.NewTx(pool, pgstore.WithTable(table))
	led := pgledger.New(pool, table, opening)
	ctx := ctxT(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = store.Close()
		if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS "`+table+`"`); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
		if err := led.DropSchema(ctx); err != nil {
			t.Errorf("DropSchema: %v", err)
		}
	})
	for _, create := range []func(context.Context) error{store.CreateSchema, led.CreateSchema} {
		if err := create(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return store, led, table
}

// In transactional mode Pay writes through the Middleware's transaction: the
// payment and its debit commit with the claim and the stored answer, and
// vanish with them when the handler answers a 5xx.
func TestPayJoinsTheMiddlewareTransaction(t *testing.T) {
	pool := newPool(t)
	other := newPool(t) // another process, outside the transaction
	store, led, table := newTxStore(t, pool, map[string]int64{"EUR": 1000})
	ctx := ctxT(t)

	var (
		status   atomic.Int64
		runs     atomic.Int64
		currency atomic.Value
		amount   atomic.Int64
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if _, ok := pgstore.TxFromContext(r.Context()); !ok {
			t.Error("the handler's context carries no transaction")
		}
		ref, _ := idempotency.DerivedKey(r.Context(), "payment")
		p, found, err := led.Pay(r.Context(), ref, 0, payment("pay_run"+string(rune('0'+n)), amount.Load(), currency.Load().(string)))
		if errors.Is(err, mockserver.ErrInsufficientFunds) {
			w.WriteHeader(http.StatusPaymentRequired)
			return
		}
		if err != nil || found {
			t.Errorf("Pay in the transaction = found %v, %v", found, err)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if n := scalar(t, other, `SELECT count(*) FROM "`+table+`_payments"`); n != 0 {
			t.Errorf("%d payments visible outside the uncommitted transaction", n)
		}
		w.WriteHeader(int(status.Load()))
		_ = json.NewEncoder(w).Encode(p)
	})
	mw := idempotency.Middleware(store)(h)
	post := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/payments", strings.NewReader(`{}`))
		req.Header.Set(idempotency.HeaderIdempotencyKey, key)
		rec := httptest.NewRecorder()
		mw.ServeHTTP(rec, req)
		return rec
	}

	// A 5xx rolls the payment back with the claim.
	currency.Store("EUR")
	amount.Store(250)
	status.Store(http.StatusInternalServerError)
	if rec := post("key-1"); rec.Code != http.StatusInternalServerError {
		t.Fatalf("POST = %d, want the handler's 500", rec.Code)
	}
	mustStored(t, other, table, 0, -1)
	if _, found, err := store.Get(ctx, idempotency.Key{Key: "key-1"}); err != nil || found {
		t.Fatalf("entry after the rollback: found %v, %v", found, err)
	}

	// A retry pays, and commits payment, debit and answer together.
	status.Store(http.StatusCreated)
	first := post("key-1")
	if first.Code != http.StatusCreated {
		t.Fatalf("retry = %d %s, want 201", first.Code, first.Body)
	}
	mustStored(t, other, table, 1, 750)
	e, found, err := store.Get(ctx, idempotency.Key{Key: "key-1"})
	if err != nil || !found || e.State != idempotency.StateCompleted || e.Response.Status != http.StatusCreated {
		t.Fatalf("entry after the commit = %+v, found %v, %v", e, found, err)
	}
	if replay := post("key-1"); replay.Code != http.StatusCreated || replay.Body.String() != first.Body.String() || runs.Load() != 2 {
		t.Errorf("replay = %d %s after %d runs; want the stored answer without a run", replay.Code, replay.Body, runs.Load())
	}

	// A refused payment commits its 402 and writes nothing to the ledger.
	currency.Store("GBP")
	amount.Store(mockserver.DefaultBalance + 1)
	if rec := post("key-2"); rec.Code != http.StatusPaymentRequired {
		t.Fatalf("POST over the balance = %d, want 402", rec.Code)
	}
	if n := scalar(t, other, `SELECT count(*) FROM "`+table+`_balances"`); n != 1 {
		t.Errorf("%d balance rows after a refused payment, want 1 (EUR)", n)
	}
	if e, found, err := store.Get(ctx, idempotency.Key{Key: "key-2"}); err != nil || !found || e.Response.Status != http.StatusPaymentRequired {
		t.Errorf("entry of the refused payment = %+v, found %v, %v; want the stored 402", e, found, err)
	}
}

// A Server given a pgstore.TxStore and a pgledger.Ledger runs in
// transactional mode, and a second Server over the same tables replays its
// payment.
func TestServerTransactional(t *testing.T) {
	pool := newPool(t)
	store, led, _ := newTxStore(t, pool, nil)
	a := mockserver.New(mockserver.WithStore(store), mockserver.WithLedger(led))
	t.Cleanup(a.Close)
	if !a.Transactional() {
		t.Fatal("the Server does not run in transactional mode with a pgledger.Ledger")
	}
	pool2 := newPool(t)
	store2 := pgstore.NewTx(pool2, pgstore.WithTable(store.Table()))
	t.Cleanup(func() { _ = store2.Close() })
	b := mockserver.New(mockserver.WithStore(store2), mockserver.WithLedger(pgledger.New(pool2, store.Table(), nil)))
	t.Cleanup(b.Close)

	body := `{"amount": 1250, "currency": "EUR", "recipient": "alice"}`
	first, second := ledgertest.Pay(t, a, "key-1", body), ledgertest.Pay(t, b, "key-1", body)
	if first.ID == "" || second.ID != first.ID {
		t.Errorf("payments %q then %q, want one replayed", first.ID, second.ID)
	}
	if bal, err := led.Balance(ctxT(t), "EUR"); err != nil || bal != mockserver.DefaultBalance-1250 {
		t.Errorf("Balance(EUR) = %d, %v", bal, err)
	}
}
