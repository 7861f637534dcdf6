package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

// TestReadLedgerIsOneSnapshot: a payment lands while the judge reads the
// ledger, between its read of the payments and its read of the balances,
// as a handler of an instance resumed after a pause does. The ledger adds
// up at every moment, and what readLedger returns must too: payments and
// balances of one moment, not the payments before the payment and the
// balances after it.
func TestReadLedgerIsOneSnapshot(t *testing.T) {
	const cur = "XAA"
	ledger := mockserver.NewMemoryLedger(map[string]int64{cur: opening})
	ms := mockserver.New(mockserver.WithLedger(ledger))
	defer ms.Close()
	ctx := context.Background()
	if _, _, err := ledger.Pay(ctx, "ref-a", time.Hour, mockserver.Payment{ID: "pay_a", Amount: 5, Currency: cur,
		Recipient: "r", Status: "succeeded", IdempotencyKey: "a", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(ms.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(w, r)
		if r.URL.Path == "/payments" {
			once.Do(func() {
				if _, _, err := ledger.Pay(ctx, "ref-b", time.Hour, mockserver.Payment{ID: "pay_b", Amount: 7, Currency: cur,
					Recipient: "r", Status: "succeeded", IdempotencyKey: "b", Created: time.Now()}); err != nil {
					t.Error(err)
				}
			})
		}
	}))
	defer front.Close()

	payments, balances, err := readLedger(ctx, strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := &op{key: "a"}, &op{key: "b"}
	a.outcome("pay_a", http.StatusCreated, nil)
	b.outcome("pay_b", http.StatusCreated, nil)
	if v := judge([]*op{a, b}, payments, opening, balances); v.BalanceOff != 0 {
		t.Fatalf("readLedger = %d payments and balances %v: off by %d from each other, though the ledger added up at every moment",
			len(payments), balances, v.BalanceOff)
	}
}

// TestJudgeWrongAmountIsNotClean: the ledger holds the one payment of
// operation a, answered to its client, with an amount other than the one
// a asked for (a body mixed up between requests, say), and a balance that
// adds up with it. The payment is not the one the operation made: the run
// is not clean.
func TestJudgeWrongAmountIsNotClean(t *testing.T) {
	a := newOps(1, "run")[0]
	a.outcome("pay_a", http.StatusCreated, nil)
	wrong := a.amount + 10
	payments := []mockserver.Payment{{ID: "pay_a", IdempotencyKey: a.key, Amount: wrong, Currency: currencies[0], Recipient: "r0"}}
	v := judge([]*op{a}, payments, opening, map[string]int64{currencies[0]: opening - wrong})
	if v.Clean() {
		t.Fatalf("judge = %+v, clean, for a payment of %d where the operation asked for %d", v, wrong, a.amount)
	}
}
