package ledgertest_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
)

// envMutant names the bug of the mutant ledger TestMutantLedgerChild runs
// the suite on; unset, that test skips.
const envMutant = "SAFERETRY_LEDGERTEST_MUTANT"

// bug is one rule of the Ledger contract that a mutant ledger breaks.
type bug string

// The bugs, each a mistake a ledger author could plausibly make.
const (
	none bug = ""
	// doubleDebit debits the amount of a re-run that finds the payment
	// under its ref: the operation's balance change applied twice.
	doubleDebit bug = "doubleDebit"
	// checkThenPay looks the ref up and pays in two steps, not atomically:
	// concurrent re-runs of one operation each pay.
	checkThenPay bug = "checkThenPay"
	// lapseLoses replaces the payment whose ref lapsed with the new one,
	// in Payments too: the older payment is lost.
	lapseLoses bug = "lapseLoses"
	// tornPay debits the balance and records the payment in two steps, as
	// a Redis ledger with HINCRBY and RPUSH outside a script would: a
	// reader in between sees the debit without the payment (and a crash
	// there would keep it so).
	tornPay bug = "tornPay"
)

// pause is how long a mutant waits between the two steps it should have
// made one.
const pause = 2 * time.Millisecond

// refLedger is a small, plain, map-based Ledger written from the contract
// alone, with at most one bug switched on. Every Ledger the suite opens
// over one record set is the same refLedger, as the memory ledger's test
// does.
type refLedger struct {
	bug      bug
	mu       sync.Mutex
	opening  map[string]int64
	balances map[string]int64
	payments []mockserver.Payment          // oldest first
	byRef    map[string]mockserver.Payment // the payment each ref names
}

func newRefLedger(b bug, opening map[string]int64) *refLedger {
	l := &refLedger{bug: b, opening: maps.Clone(opening)}
	l.reset()
	return l
}

func (l *refLedger) reset() {
	l.balances, l.payments, l.byRef = maps.Clone(l.opening), nil, map[string]mockserver.Payment{}
	if l.balances == nil {
		l.balances = map[string]int64{}
	}
}

func (l *refLedger) balance(currency string) int64 {
	if b, ok := l.balances[currency]; ok {
		return b
	}
	return mockserver.OpeningBalance(l.opening, currency)
}

// wait unlocks l for pause: a mutant's gap between two steps.
func (l *refLedger) wait() {
	l.mu.Unlock()
	<-time.After(pause)
	l.mu.Lock()
}

func (l *refLedger) Pay(ctx context.Context, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	if err := ctx.Err(); err != nil {
		return mockserver.Payment{}, false, err
	}
	if p.Amount <= 0 {
		return mockserver.Payment{}, false, fmt.Errorf("amount %d is not positive", p.Amount)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	prior, had := l.byRef[ref]
	if had && (keep <= 0 || p.Created.Sub(prior.Created) < keep) {
		if l.bug == doubleDebit {
			l.balances[p.Currency] = l.balance(p.Currency) - p.Amount
		}
		return prior, true, nil
	}
	if l.bug == checkThenPay {
		l.wait()
	}
	bal := l.balance(p.Currency)
	if p.Amount > bal {
		return mockserver.Payment{}, false, mockserver.ErrInsufficientFunds
	}
	p.Ref = ref
	l.byRef[ref] = p
	l.balances[p.Currency] = bal - p.Amount
	if l.bug == tornPay {
		l.wait()
	}
	if had && l.bug == lapseLoses {
		for i := range l.payments {
			if l.payments[i].ID == prior.ID {
				l.payments[i] = p
				return p, false, nil
			}
		}
	}
	l.payments = append(l.payments, p)
	return p, false, nil
}

func (l *refLedger) Payments(context.Context) ([]mockserver.Payment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]mockserver.Payment(nil), l.payments...), nil
}

func (l *refLedger) Payment(_ context.Context, id string) (mockserver.Payment, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.payments {
		if p.ID == id {
			return p, true, nil
		}
	}
	return mockserver.Payment{}, false, nil
}

func (l *refLedger) Balances(context.Context) (map[string]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.balances), nil
}

func (l *refLedger) Balance(_ context.Context, currency string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.balance(currency), nil
}

func (l *refLedger) Reset(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reset()
	return nil
}

// TestMutantLedgerChild runs the suite on the ledger with the bug named by
// envMutant ("none" for the ledger without a bug). It is run only as a
// child process of the tests below.
func TestMutantLedgerChild(t *testing.T) {
	name, ok := os.LookupEnv(envMutant)
	if !ok {
		t.Skip("run by the TestSuiteRejects tests only")
	}
	b := bug(name)
	if name == "none" {
		b = none
	}
	ledgertest.Run(t, func(t *testing.T, opening map[string]int64) func() mockserver.Ledger {
		l := newRefLedger(b, opening)
		return func() mockserver.Ledger { return l }
	})
}

// runMutant runs the cases matched by pattern (all when "") on the ledger
// with bug b in a child process, and returns its output and whether it
// passed.
func runMutant(t *testing.T, b bug, pattern string) (string, bool) {
	t.Helper()
	name := string(b)
	if b == none {
		name = "none"
	}
	return testkit.RunChildTest(t, "^TestMutantLedgerChild$/"+pattern, envMutant, name, 90*time.Second)
}

// TestRefLedgerPassesTheSuite: the ledger the mutants are made from,
// without a bug, passes the whole suite, so that a case failing on a mutant
// fails for its bug.
func TestRefLedgerPassesTheSuite(t *testing.T) {
	if out, ok := runMutant(t, none, ""); !ok {
		t.Fatalf("the suite failed the ledger without a bug:\n%s", out)
	}
}

// TestSuiteRejects runs the suite on each mutant, a ledger that breaks one
// rule of the contract, and wants the cases named for that rule to fail.
func TestSuiteRejects(t *testing.T) {
	for _, m := range []struct {
		name  string
		bug   bug
		cases []string
	}{
		// A re-run that finds the payment changes nothing.
		{"DebitOnReRun", doubleDebit, []string{"SameRefFindsTheFirstPayment", "InstancesAgree"}},
		// Concurrent re-runs of one operation make one payment.
		{"CheckThenPay", checkThenPay, []string{"ConcurrentSameRefOnePayment", "ConcurrentLapsedRefOnePayment"}},
		// A payment whose ref lapsed stays in Payments.
		{"LapseLosesThePayment", lapseLoses, []string{"RefLapsesAfterKeep"}},
		// Pay records the payment and debits the balance both or neither, as
		// every reader sees it.
		{"TornPayment", tornPay, []string{"ReadersSeeWholePayments"}},
	} {
		t.Run(m.name, func(t *testing.T) {
			out, ok := runMutant(t, m.bug, "^("+strings.Join(m.cases, "|")+")$")
			if ok {
				t.Fatalf("the suite passed a ledger with bug %s (cases %v):\n%s", m.bug, m.cases, out)
			}
			for _, c := range m.cases {
				if !strings.Contains(out, "--- FAIL: TestMutantLedgerChild/"+c+" ") {
					t.Errorf("case %s did not fail on the ledger with bug %s:\n%s", c, m.bug, out)
				}
			}
		})
	}
}
