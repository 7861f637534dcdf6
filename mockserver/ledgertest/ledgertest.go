// Package ledgertest is the conformance suite for mockserver.Ledger
// implementations. A ledger package calls Run from one test:
//
//	func TestConformance(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T, opening map[string]int64) func() mockserver.Ledger {
//			// set up empty, fresh records for t (a table, a key prefix), then:
//			return func() mockserver.Ledger { return open(records) }
//		})
//	}
//
// The function given to Run prepares fresh, empty records with the given
// opening balances and returns an opener: each call gives a Ledger over
// those same records, as another process of the service would have, so the
// suite checks that instances agree. It registers its own cleanup.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

// Opener prepares fresh records with the opening balances and returns a
// function that opens a Ledger over them; see the package documentation.
// Run calls an Opener, and the function it returns, from the test's
// goroutine only; the Ledgers it opens are used from many at once.
type Opener func(t *testing.T, opening map[string]int64) func() mockserver.Ledger

// Run checks that the ledgers open gives behave as mockserver.Ledger says.
// Subtests run one after another, each on fresh records.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func() mockserver.Ledger)
	}{
		{"PayRecordsAndDebits", testPay},
		{"SameRefFindsTheFirstPayment", testSameRef},
		{"InsufficientFundsChangesNothing", testInsufficient},
		{"NonPositiveAmountRefused", testNonPositiveAmount},
		{"ConcurrentSameRefOnePayment", testConcurrentSameRef},
		{"RefLapsesAfterKeep", testRefLapses},
		{"ConcurrentLapsedRefOnePayment", testConcurrentLapsedRef},
		{"KeepZeroKeepsForGood", testKeepForGood},
		{"ConcurrentPaymentsAddUp", testConcurrentPayments},
		{"ReadersSeeWholePayments", testReadersSeeWholePayments},
		{"InstancesAgree", testInstancesAgree},
		{"ResetRestoresOpening", testReset},
		{"ContextCancelled", testContextCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t, map[string]int64{"EUR": 10_000, "JPY": 50}))
		})
	}
	t.Run("BalancesExact", func(t *testing.T) { testBalancesExact(t, open(t, exactOpening)) })
}

// keep is the keep the suite pays with, as a Server passes its
// idempotency TTL; the payments' Created times, not the wall clock, decide
// whether a ref lapsed, so the suite needs no sleeps.
const keep = time.Hour

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var seq struct {
	sync.Mutex
	n int
}

// payment returns a payment of amount in currency with a new ID, as the
// Server makes them.
func payment(amount int64, currency, key string) mockserver.Payment {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	return mockserver.Payment{
		ID:             fmt.Sprintf("pay_test%012d", n),
		Amount:         amount,
		Currency:       currency,
		Recipient:      "recipient ✓ " + key,
		Status:         "succeeded",
		IdempotencyKey: key,
		Created:        time.Date(2026, 12, 1, 10, 0, 0, n*int(time.Millisecond), time.UTC),
	}
}

func mustBalance(t *testing.T, l mockserver.Ledger, currency string, want int64) {
	t.Helper()
	got, err := l.Balance(ctxT(t), currency)
	if err != nil {
		t.Fatalf("Balance(%s): %v", currency, err)
	}
	if got != want {
		t.Errorf("Balance(%s) = %d, want %d", currency, got, want)
	}
}

func mustPayments(t *testing.T, l mockserver.Ledger) []mockserver.Payment {
	t.Helper()
	ps, err := l.Payments(ctxT(t))
	if err != nil {
		t.Fatalf("Payments: %v", err)
	}
	return ps
}

func samePayment(a, b mockserver.Payment) bool {
	return a.ID == b.ID && a.Amount == b.Amount && a.Currency == b.Currency && a.Recipient == b.Recipient &&
		a.Status == b.Status && a.IdempotencyKey == b.IdempotencyKey && a.Ref == b.Ref && a.Created.Equal(b.Created)
}

func testPay(t *testing.T, open func() mockserver.Ledger) {
	l := open()
	ctx := ctxT(t)
	p := payment(1250, "EUR", "k1")
	got, found, err := l.Pay(ctx, "ref-1", keep, p)
	if err != nil || found {
		t.Fatalf("Pay = %+v, found %v, %v; want a new payment", got, found, err)
	}
	p.Ref = "ref-1"
	if !samePayment(got, p) {
		t.Fatalf("Pay returned %+v, want %+v", got, p)
	}
	mustBalance(t, l, "EUR", 10_000-1250)
	mustBalance(t, l, "JPY", 50)
	mustBalance(t, l, "USD", mockserver.DefaultBalance)
	p2 := payment(7, "USD", "k2")
	if _, _, err := l.Pay(ctx, "ref-2", keep, p2); err != nil {
		t.Fatal(err)
	}
	ps := mustPayments(t, l)
	if len(ps) != 2 || ps[0].ID != p.ID || ps[1].ID != p2.ID {
		t.Fatalf("Payments = %+v, want the two payments oldest first", ps)
	}
	if !samePayment(ps[0], p) {
		t.Errorf("listed %+v, want %+v", ps[0], p)
	}
	one, ok, err := l.Payment(ctx, p.ID)
	if err != nil || !ok || !samePayment(one, p) {
		t.Errorf("Payment(%s) = %+v, %v, %v", p.ID, one, ok, err)
	}
	if _, ok, err := l.Payment(ctx, "pay_none"); err != nil || ok {
		t.Errorf("Payment(unknown) = %v, %v; want not found", ok, err)
	}
	bals, err := l.Balances(ctx)
	if err != nil || bals["EUR"] != 10_000-1250 || bals["USD"] != mockserver.DefaultBalance-7 {
		t.Errorf("Balances = %v, %v", bals, err)
	}
}

func testSameRef(t *testing.T, open func() mockserver.Ledger) {
	l := open()
	ctx := ctxT(t)
	first, _, err := l.Pay(ctx, "ref", keep, payment(100, "EUR", "k"))
	if err != nil {
		t.Fatal(err)
	}
	again, found, err := l.Pay(ctx, "ref", keep, payment(100, "EUR", "k")) // a re-run: a new ID
	if err != nil || !found || !samePayment(again, first) {
		t.Fatalf("second Pay with the same ref = %+v, found %v, %v; want the first %+v", again, found, err, first)
	}
	// Pay does not compare the fields (see mockserver.Ledger.Pay): another
	// amount, currency and recipient, even one the balance cannot cover,
	// get the first payment as it was made, and change nothing.
	other := payment(60, "JPY", "k")
	other.Recipient = "someone else"
	again, found, err = l.Pay(ctx, "ref", keep, other)
	if err != nil || !found || !samePayment(again, first) {
		t.Fatalf("Pay with the same ref and other fields = %+v, found %v, %v; want the first %+v", again, found, err, first)
	}
	mustBalance(t, l, "EUR", 10_000-100)
	mustBalance(t, l, "JPY", 50)
	if n := len(mustPayments(t, l)); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}

func testInsufficient(t *testing.T, open func() mockserver.Ledger) {
	l := open()
	ctx := ctxT(t)
	_, _, err := l.Pay(ctx, "too-much", keep, payment(51, "JPY", "k"))
	if !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Fatalf("Pay over the balance = %v, want ErrInsufficientFunds", err)
	}
	mustBalance(t, l, "JPY", 50)
	if n := len(mustPayments(t, l)); n != 0 {
		t.Fatalf("%d payments after a refused one", n)
	}
	// The ref is not used up: the same operation may succeed later.
	if _, found, err := l.Pay(ctx, "too-much", keep, payment(50, "JPY", "k")); err != nil || found {
		t.Fatalf("Pay of the exact balance = found %v, %v", found, err)
	}
	mustBalance(t, l, "JPY", 0)
}

// testNonPositiveAmount: a Payment's Amount is always > 0; a Pay of zero
// or less, which would credit the balance (MinInt64 would overflow it), is
// refused and changes nothing, and does not use the ref up.
func testNonPositiveAmount(t *testing.T, open func() mockserver.Ledger) {
	l := open()
	ctx := ctxT(t)
	for _, amount := range []int64{0, -1, -10_000, math.MinInt64} {
		ref := fmt.Sprintf("non-positive-%d", amount)
		if got, found, err := l.Pay(ctx, ref, keep, payment(amount, "EUR", "k")); err == nil {
			t.Errorf("Pay of %d = %+v, found %v; want an error", amount, got, found)
		}
		if _, found, err := l.Pay(ctx, ref, keep, payment(1, "EUR", "k")); err != nil || found {
			t.Errorf("Pay under the ref of a refused Pay of %d = found %v, %v; want a new payment", amount, found, err)
		}
	}
	mustBalance(t, l, "EUR", 10_000-4)
	if n := len(mustPayments(t, l)); n != 4 {
		t.Errorf("%d payments, want the 4 of 1", n)
	}
}

func testConcurrentSameRef(t *testing.T, open func() mockserver.Ledger) {
	ledgers := openN(open, 4)
	payOnce(t, ledgers, func(p mockserver.Payment) mockserver.Payment { return p })
	mustBalance(t, ledgers[0], "EUR", 10_000-10)
	if ps := mustPayments(t, ledgers[0]); len(ps) != 1 {
		t.Errorf("%d payments, want 1", len(ps))
	}
}

// openN opens n ledgers over the same records, as n processes would.
func openN(open func() mockserver.Ledger, n int) []mockserver.Ledger {
	ledgers := make([]mockserver.Ledger, n)
	for i := range ledgers {
		ledgers[i] = open()
	}
	return ledgers
}

// payOnce runs 20 payments of 10 EUR under the ref "contended" at once,
// each made by edit from a new payment, spread over ledgers; it checks that
// exactly one recorded a payment and that all answered it, and returns it.
func payOnce(t *testing.T, ledgers []mockserver.Ledger, edit func(mockserver.Payment) mockserver.Payment) mockserver.Payment {
	t.Helper()
	const runs = 20
	ctx := ctxT(t)
	var wg sync.WaitGroup
	got := make([]mockserver.Payment, runs)
	fresh := make([]bool, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, found, err := ledgers[i%len(ledgers)].Pay(ctx, "contended", keep, edit(payment(10, "EUR", "k")))
			if err != nil {
				t.Errorf("Pay %d: %v", i, err)
				return
			}
			got[i], fresh[i] = p, !found
		}()
	}
	wg.Wait()
	n := 0
	for i := range runs {
		if fresh[i] {
			n++
		}
		if got[i].ID != got[0].ID {
			t.Errorf("run %d answered payment %s, run 0 %s", i, got[i].ID, got[0].ID)
		}
	}
	if n != 1 {
		t.Errorf("%d runs recorded a payment, want exactly 1", n)
	}
	return got[0]
}

func testConcurrentPayments(t *testing.T, open func() mockserver.Ledger) {
	const n = 40
	ctx := ctxT(t)
	a, b := open(), open()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			if _, _, err := l.Pay(ctx, fmt.Sprintf("ref-%d", i), keep, payment(int64(i+1), "EUR", fmt.Sprint(i))); err != nil {
				t.Errorf("Pay %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	mustBalance(t, a, "EUR", 10_000-n*(n+1)/2)
	if ps := mustPayments(t, b); len(ps) != n {
		t.Errorf("%d payments, want %d", len(ps), n)
	}
}

// testReadersSeeWholePayments: another instance never sees one effect of
// a Pay without the other, the payment without the debit or the debit
// without the payment. While payments are made one after another, it reads
// the balance, the payments, and the balance again: when both balances
// agree, no payment came in between (each takes the balance down), so the
// payments must add up to the balance.
func testReadersSeeWholePayments(t *testing.T, open func() mockserver.Ledger) {
	const n = 30
	a, b := open(), open()
	ctx := ctxT(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			if _, _, err := a.Pay(ctx, fmt.Sprintf("whole-%d", i), keep, payment(int64(i+1), "EUR", fmt.Sprint(i))); err != nil {
				t.Errorf("Pay %d: %v", i, err)
				return
			}
		}
	}()
	defer func() { <-done }() // a failed read ends the test only after the payments
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true // one more read, of the final state
		default:
		}
		before, err := b.Balance(ctx, "EUR")
		if err != nil {
			t.Fatalf("Balance: %v", err)
		}
		ps := mustPayments(t, b)
		after, err := b.Balance(ctx, "EUR")
		if err != nil {
			t.Fatalf("Balance: %v", err)
		}
		if before != after {
			continue
		}
		var paid int64
		for _, p := range ps {
			if p.Currency == "EUR" {
				paid += p.Amount
			}
		}
		if paid != 10_000-before {
			t.Fatalf("Balance(EUR) %d before and after reading %d payments of %d in all; want them to add up to %d: "+
				"a payment seen without its debit, or a debit without its payment", before, len(ps), paid, 10_000-before)
		}
	}
}

func testInstancesAgree(t *testing.T, open func() mockserver.Ledger) {
	a, b := open(), open()
	ctx := ctxT(t)
	p, _, err := a.Pay(ctx, "ref", keep, payment(300, "EUR", "k"))
	if err != nil {
		t.Fatal(err)
	}
	if got, found, err := b.Pay(ctx, "ref", keep, payment(300, "EUR", "k")); err != nil || !found || got.ID != p.ID {
		t.Fatalf("another instance's Pay = %+v, found %v, %v; want %s", got, found, err, p.ID)
	}
	mustBalance(t, b, "EUR", 10_000-300)
	if one, ok, err := b.Payment(ctx, p.ID); err != nil || !ok || !samePayment(one, p) {
		t.Fatalf("another instance's Payment = %+v, %v, %v", one, ok, err)
	}
}

func testReset(t *testing.T, open func() mockserver.Ledger) {
	a, b := open(), open()
	ctx := ctxT(t)
	if _, _, err := a.Pay(ctx, "ref", keep, payment(300, "EUR", "k")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Pay(ctx, "ref-usd", keep, payment(3, "USD", "k2")); err != nil {
		t.Fatal(err)
	}
	if err := b.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	mustBalance(t, a, "EUR", 10_000)
	mustBalance(t, a, "USD", mockserver.DefaultBalance)
	if n := len(mustPayments(t, a)); n != 0 {
		t.Fatalf("%d payments after Reset", n)
	}
	if _, found, err := a.Pay(ctx, "ref", keep, payment(1, "EUR", "k")); err != nil || found {
		t.Fatalf("Pay after Reset = found %v, %v; want a new payment", found, err)
	}
}

func testContextCancelled(t *testing.T, open func() mockserver.Ledger) {
	l := open()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := l.Pay(ctx, "ref", keep, payment(1, "EUR", "k")); err == nil {
		t.Error("Pay with a cancelled context succeeded")
	}
	mustBalance(t, l, "EUR", 10_000)
}

// at returns p created at t.
func at(p mockserver.Payment, t time.Time) mockserver.Payment {
	p.Created = t
	return p
}

// t0 is the Created of the first payment in the lapse tests.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testRefLapses(t *testing.T, open func() mockserver.Ledger) {
	a, b := open(), open()
	ctx := ctxT(t)
	first, _, err := a.Pay(ctx, "ref", keep, at(payment(100, "EUR", "k"), t0))
	if err != nil {
		t.Fatal(err)
	}
	// A re-run within keep (a takeover) finds the first payment.
	if got, found, err := b.Pay(ctx, "ref", keep, at(payment(100, "EUR", "k"), t0.Add(keep-time.Millisecond))); err != nil || !found || !samePayment(got, first) {
		t.Fatalf("Pay %v after the first = %+v, found %v, %v; want the first %+v", keep-time.Millisecond, got, found, err, first)
	}
	// keep after it the key executes anew: a new payment under the ref.
	p := at(payment(100, "EUR", "k"), t0.Add(keep))
	second, found, err := b.Pay(ctx, "ref", keep, p)
	p.Ref = "ref"
	if err != nil || found || !samePayment(second, p) {
		t.Fatalf("Pay %v after the first = %+v, found %v, %v; want the new %+v", keep, second, found, err, p)
	}
	mustBalance(t, a, "EUR", 10_000-200)
	ps := mustPayments(t, a)
	if len(ps) != 2 || ps[0].ID != first.ID || ps[1].ID != second.ID {
		t.Fatalf("Payments = %+v, want the first %s and the new %s", ps, first.ID, second.ID)
	}
	if one, ok, err := a.Payment(ctx, first.ID); err != nil || !ok || one.Amount != first.Amount || !one.Created.Equal(first.Created) {
		t.Errorf("Payment(%s) after its ref lapsed = %+v, %v, %v; want it kept", first.ID, one, ok, err)
	}
	// From now on the ref names the new payment, on every instance.
	for name, l := range map[string]mockserver.Ledger{"a": a, "b": b} {
		got, found, err := l.Pay(ctx, "ref", keep, at(payment(100, "EUR", "k"), t0.Add(2*keep-time.Millisecond)))
		if err != nil || !found || !samePayment(got, second) {
			t.Errorf("%s: Pay after the new payment = %+v, found %v, %v; want the new %+v", name, got, found, err, second)
		}
	}
	mustBalance(t, b, "EUR", 10_000-200)
}

func testConcurrentLapsedRef(t *testing.T, open func() mockserver.Ledger) {
	ledgers := openN(open, 4)
	first, _, err := ledgers[0].Pay(ctxT(t), "contended", keep, at(payment(10, "EUR", "k"), t0))
	if err != nil {
		t.Fatal(err)
	}
	later := func(p mockserver.Payment) mockserver.Payment { return at(p, t0.Add(keep+time.Second)) }
	if p := payOnce(t, ledgers, later); p.ID == first.ID {
		t.Errorf("the runs after the keep answered the lapsed payment %s", first.ID)
	}
	mustBalance(t, ledgers[0], "EUR", 10_000-20)
	if ps := mustPayments(t, ledgers[0]); len(ps) != 2 {
		t.Errorf("%d payments, want 2", len(ps))
	}
}

func testKeepForGood(t *testing.T, open func() mockserver.Ledger) {
	l := open()
	ctx := ctxT(t)
	first, _, err := l.Pay(ctx, "ref", 0, at(payment(100, "EUR", "k"), t0))
	if err != nil {
		t.Fatal(err)
	}
	later := t0.Add(100 * 365 * 24 * time.Hour)
	if got, found, err := l.Pay(ctx, "ref", 0, at(payment(100, "EUR", "k"), later)); err != nil || !found || !samePayment(got, first) {
		t.Fatalf("Pay with keep 0 a century later = %+v, found %v, %v; want the first %+v", got, found, err, first)
	}
	mustBalance(t, l, "EUR", 10_000-100)
}

// big is the smallest int64 that a double cannot hold: as doubles (Lua's
// numbers), big-1 and big are equal.
const big = 1<<53 + 1

// exactOpening are the opening balances of testBalancesExact: at the ends
// of int64, and just below big.
var exactOpening = map[string]int64{"EUR": big - 1, "USD": math.MaxInt64, "JPY": -5}

// testBalancesExact: balances are compared and debited exactly, at the
// ends of int64 and beyond 2^53, where a comparison of doubles would round.
func testBalancesExact(t *testing.T, open func() mockserver.Ledger) {
	l := open()
	ctx := ctxT(t)
	if _, _, err := l.Pay(ctx, "eur", 0, payment(big, "EUR", "k-eur")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Errorf("Pay of %d from %d = %v, want ErrInsufficientFunds", int64(big), int64(big-1), err)
	}
	if _, _, err := l.Pay(ctx, "usd", 0, payment(math.MaxInt64-1, "USD", "k-usd")); err != nil {
		t.Fatal(err)
	}
	mustBalance(t, l, "USD", 1)
	if _, _, err := l.Pay(ctx, "usd-2", 0, payment(2, "USD", "k-usd-2")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Errorf("Pay of 2 from 1 = %v, want ErrInsufficientFunds", err)
	}
	if _, _, err := l.Pay(ctx, "jpy", 0, payment(1, "JPY", "k-jpy")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Errorf("Pay of 1 from -5 = %v, want ErrInsufficientFunds", err)
	}
	bals, err := l.Balances(ctx)
	if err != nil || len(bals) != 3 || bals["USD"] != 1 || bals["EUR"] != big-1 || bals["JPY"] != -5 {
		t.Errorf("Balances = %v, %v; want USD 1, EUR %d, JPY -5", bals, err, int64(big-1))
	}
}
