package mockserver

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"
)

// ErrInsufficientFunds is returned (possibly wrapped) by Ledger.Pay when the
// balance of the payment's currency is lower than its amount; the ledger
// then changes nothing and the Server answers 402. Match it with errors.Is.
var ErrInsufficientFunds = errors.New("mockserver: insufficient funds")

// Ledger keeps a Server's payments and balances. New gives every Server a
// ledger in its own memory unless WithLedger hands it another:
// mockserver/redisledger and mockserver/pgledger keep one in Redis or
// PostgreSQL, shared by every Server (every cmd/mockserver process) over
// the same store, so that all instances of the service answer from the same
// records and a payment made by an instance that died is not lost.
//
// A Ledger is safe for concurrent use, and a shared one for use by several
// processes at once.
type Ledger interface {
	// Pay records p under ref and takes p.Amount from the balance of
	// p.Currency, both or neither, unless the payment recorded under ref
	// is still kept: made less than keep before p.Created (whenever made,
	// when keep <= 0). Then it returns that payment, changes nothing, and reports
	// found. Otherwise p is a new payment and ref names p from then on;
	// the older payment stays in Payments. It returns an error matching
	// ErrInsufficientFunds, and changes nothing, when the balance is too
	// low. The Server chooses p (a new ID, the creation time, the
	// request's fields, p.Ref == ref) and gives every execution of one
	// operation the same ref, idempotency.DerivedKey of its key, so that a
	// re-run after a takeover finds the first run's payment and answers
	// with it.
	//
	// keep is the Server's idempotency TTL (idempotency.WithTTL): after
	// the TTL the contract executes a key anew, and a ref kept for good
	// would answer that execution with the first payment. A takeover comes
	// when a retry arrives after the first run's lease lapsed, in practice
	// far inside the TTL, so it still finds the payment. A record is kept for the TTL from its
	// completion, which comes after the payment (idempotency.Store's
	// expiry; pgstore keeps it up to a second longer), so the ledger lets
	// go of the ref first and, in between, the record replays and the
	// handler does not run. The edge: a claim abandoned after its payment
	// lives for the TTL from the claim (or its last renewal plus a lease),
	// so a takeover in the last moments of that TTL, later than keep after
	// the payment, pays anew. keep is measured between the Created times,
	// the Servers' clock, so every Ledger decides alike whatever its
	// store's clock; Servers sharing a ledger must keep their clocks close.
	Pay(ctx context.Context, ref string, keep time.Duration, p Payment) (got Payment, found bool, err error)
	// Payments returns every payment, oldest first.
	Payments(ctx context.Context) ([]Payment, error)
	// Payment returns the payment with the given ID, if any.
	Payment(ctx context.Context, id string) (Payment, bool, error)
	// Balances returns the balance of every currency with an opening
	// balance or a payment.
	Balances(ctx context.Context) (map[string]int64, error)
	// Balance returns the balance of currency (three upper-case letters):
	// its opening balance less its payments.
	Balance(ctx context.Context, currency string) (int64, error)
	// Reset removes every payment and restores the opening balances.
	Reset(ctx context.Context) error
}

// TxLedger is a Ledger whose Pay writes through the database transaction
// that the idempotency Middleware hands to the handler in transactional
// mode (pgledger's does, through pgstore.TxFromContext). Given one together
// with an idempotency.TxStore, a Server runs its Middleware in
// transactional mode: the claim, the payment and the stored answer commit
// together. With any other Ledger a TxStore runs in lease mode, because a
// rollback could not undo the payment.
type TxLedger interface {
	Ledger
	// JoinsTransactions marks a TxLedger; it does nothing.
	JoinsTransactions()
}

// OpeningBalance returns the opening balance of currency under opening
// (the WithBalance values, or a shared ledger's own): its value there, or
// DefaultBalance.
func OpeningBalance(opening map[string]int64, currency string) int64 {
	if v, ok := opening[currency]; ok {
		return v
	}
	return DefaultBalance
}

// kept reports whether a payment created at prior still answers, under its
// ref, a payment created at now: keep <= 0, or now is less than keep after
// prior (see Ledger.Pay).
func kept(prior, now time.Time, keep time.Duration) bool {
	return keep <= 0 || now.Sub(prior) < keep
}

// NewMemoryLedger returns a Ledger in memory with the given opening
// balances (currencies without one open at DefaultBalance): the one every
// Server has unless WithLedger gives another. It protects one process only.
func NewMemoryLedger(opening map[string]int64) Ledger { return newMemLedger(opening) }

// memLedger is the Ledger a Server keeps in its own memory.
type memLedger struct {
	mu       sync.Mutex
	opening  map[string]int64
	balances map[string]int64
	payments []Payment
	byRef    map[string]int // index in payments
}

var _ Ledger = (*memLedger)(nil)

func newMemLedger(opening map[string]int64) *memLedger {
	l := &memLedger{opening: maps.Clone(opening)}
	l.reset()
	return l
}

func (l *memLedger) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.balances = maps.Clone(l.opening)
	if l.balances == nil {
		l.balances = map[string]int64{}
	}
	l.payments = nil
	l.byRef = map[string]int{}
}

func (l *memLedger) balanceLocked(currency string) int64 {
	if v, ok := l.balances[currency]; ok {
		return v
	}
	return OpeningBalance(l.opening, currency)
}

func (l *memLedger) Pay(ctx context.Context, ref string, keep time.Duration, p Payment) (Payment, bool, error) {
	if err := ctx.Err(); err != nil {
		return Payment{}, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.byRef[ref]; ok && kept(l.payments[i].Created, p.Created, keep) {
		return l.payments[i], true, nil
	}
	bal := l.balanceLocked(p.Currency)
	if p.Amount > bal {
		return Payment{}, false, ErrInsufficientFunds
	}
	p.Ref = ref
	l.balances[p.Currency] = bal - p.Amount
	l.byRef[ref] = len(l.payments)
	l.payments = append(l.payments, p)
	return p, false, nil
}

func (l *memLedger) Payments(context.Context) ([]Payment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Payment(nil), l.payments...), nil
}

func (l *memLedger) Payment(_ context.Context, id string) (Payment, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.payments {
		if p.ID == id {
			return p, true, nil
		}
	}
	return Payment{}, false, nil
}

func (l *memLedger) Balances(context.Context) (map[string]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.balances), nil
}

func (l *memLedger) Balance(_ context.Context, currency string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.balanceLocked(currency), nil
}

func (l *memLedger) Reset(context.Context) error {
	l.reset()
	return nil
}
