package mockserver

import (
	"context"
	"errors"
	"fmt"
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
	// p.Currency, both or neither, as every reader (of any instance) sees
	// it: no read finds the payment without the debit or the debit
	// without the payment. It does so unless the payment recorded under
	// ref is still kept: made less than keep before p.Created (whenever
	// made, when keep <= 0). Then it returns that payment, changes
	// nothing, and reports found, whatever p holds: Pay does not compare
	// the two, so a p with another amount, currency or recipient gets the
	// earlier payment as it was made (the Server never passes one: a
	// different body under the same Idempotency-Key is answered 422 before
	// the handler runs). Otherwise p is a new payment and ref
	// names p from then on; the older payment stays in Payments. It
	// returns an error matching ErrInsufficientFunds, and changes nothing,
	// when the balance is too low, and an error, changing nothing, when
	// p.Amount is not positive (a Payment's Amount is always > 0). The
	// Server chooses p (a new ID, the creation time, the request's fields,
	// p.Ref == ref) and gives every execution of one operation the same
	// ref, idempotency.DerivedKey of its key, so that a re-run after a
	// takeover finds the first run's payment and answers with it.
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
// rollback could not undo the payment. Like every Ledger, an
// implementation must be safe for concurrent use: the Server calls Pay and
// the readers from the goroutines of concurrent requests.
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

// memLedger is the Ledger a Server keeps in its own memory. It keeps every
// payment, so it keeps them where the collector, which scans every pointer
// of the live heap on each cycle, has nothing to scan: their strings in
// textChunks, their other fields in records without pointers, and the
// index by ref in a strIndex.
type memLedger struct {
	mu       sync.Mutex
	opening  map[string]int64
	balances map[string]int64
	text     textChunks             // the strings of the payments, a run each
	payments records[paymentRecord] // oldest first
	oddTimes map[int32]time.Time
	byRef    strIndex // the newest payment of each ref
}

// paymentRecord is a Payment as memLedger keeps it.
type paymentRecord struct {
	text    textPos   // its run of strings in the ledger's text
	lens    [6]uint32 // their lengths, in the order of paymentStrings
	amount  int64
	created int64 // Created in Unix nanoseconds, unless odd
	odd     bool  // Created is not time.Unix(0, n).UTC(): it is in oddTimes
}

// paymentStrings are the strings of p, in the order a paymentRecord keeps
// them; the ref is the last.
func paymentStrings(p *Payment) [6]string {
	return [...]string{p.ID, p.Currency, p.Recipient, p.Status, p.IdempotencyKey, p.Ref}
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
	l.text, l.payments, l.oddTimes, l.byRef = textChunks{}, records[paymentRecord]{}, nil, strIndex{}
}

func (l *memLedger) balanceLocked(currency string) int64 {
	if v, ok := l.balances[currency]; ok {
		return v
	}
	return OpeningBalance(l.opening, currency)
}

// add records p as the newest payment; h is strHash(p.Ref), and free
// whether byRef.get found no ref with that hash (see strIndex.set). The
// lock must be held.
func (l *memLedger) add(p *Payment, h uint64, free bool) {
	i := l.payments.len()
	strs := paymentStrings(p)
	r := paymentRecord{text: l.text.add(strs[:]...), amount: p.Amount, created: p.Created.UnixNano()}
	for j, s := range strs {
		r.lens[j] = uint32(len(s))
	}
	if time.Unix(0, r.created).UTC() != p.Created {
		// A monotonic reading, a location other than UTC, or a time out
		// of UnixNano's range: kept as it is.
		r.odd = true
		if l.oddTimes == nil {
			l.oddTimes = make(map[int32]time.Time)
		}
		l.oddTimes[i] = p.Created
	}
	l.payments.add(r)
	l.byRef.set(h, p.Ref, i, l.hasRef, free)
}

// field returns the bytes of the j-th string (see paymentStrings) of the
// payment at i. The lock must be held.
func (l *memLedger) field(i int32, j int) []byte {
	r := l.payments.at(i)
	off := 0
	for _, n := range r.lens[:j] {
		off += int(n)
	}
	return l.text.bytes(r.text, off, int(r.lens[j]))
}

// hasRef reports whether the payment at i has the ref ref. The lock must
// be held.
func (l *memLedger) hasRef(i int32, ref string) bool { return string(l.field(i, 5)) == ref }

// createdAt returns the Created of the payment at i. The lock must be held.
func (l *memLedger) createdAt(i int32) time.Time {
	if r := l.payments.at(i); !r.odd {
		return time.Unix(0, r.created).UTC()
	}
	return l.oddTimes[i]
}

// payment returns the payment at i. Its strings share one allocation. The
// lock must be held.
func (l *memLedger) payment(i int32) Payment {
	r := l.payments.at(i)
	n := 0
	for _, m := range r.lens {
		n += int(m)
	}
	text := string(l.text.bytes(r.text, 0, n))
	var s [6]string
	for j, m := range r.lens {
		s[j], text = text[:m], text[m:]
	}
	return Payment{ID: s[0], Amount: r.amount, Currency: s[1], Recipient: s[2], Status: s[3],
		IdempotencyKey: s[4], Ref: s[5], Created: l.createdAt(i)}
}

func (l *memLedger) Pay(ctx context.Context, ref string, keep time.Duration, p Payment) (Payment, bool, error) {
	if err := ctx.Err(); err != nil {
		return Payment{}, false, err
	}
	if p.Amount <= 0 {
		return Payment{}, false, fmt.Errorf("mockserver: pay: amount %d is not positive", p.Amount)
	}
	h := strHash(ref)
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok, free := l.byRef.get(h, ref, l.hasRef)
	if ok && kept(l.createdAt(i), p.Created, keep) {
		return l.payment(i), true, nil
	}
	bal := l.balanceLocked(p.Currency)
	if p.Amount > bal {
		return Payment{}, false, ErrInsufficientFunds
	}
	p.Ref = ref
	l.balances[p.Currency] = bal - p.Amount
	l.add(&p, h, free)
	return p, false, nil
}

func (l *memLedger) Payments(context.Context) ([]Payment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.payments.len() == 0 {
		return nil, nil
	}
	out := make([]Payment, l.payments.len())
	for i := range out {
		out[i] = l.payment(int32(i))
	}
	return out, nil
}

func (l *memLedger) Payment(_ context.Context, id string) (Payment, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.payments.len() {
		if string(l.field(i, 0)) == id {
			return l.payment(i), true, nil
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
