package chaos

import (
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

// Verdict is what a run's shared ledger and its client's answers show.
type Verdict struct {
	// Ops is the number of logical operations the client made.
	Ops int
	// Payments is the number of payments in the ledger.
	Payments int
	// Doubles counts the payments beyond the first of any one operation
	// (Idempotency-Key): the double executions.
	Doubles int
	// Lost counts the operations whose client was answered with a payment
	// that the ledger does not hold under the operation's key: one it does
	// not hold at all, or another operation's.
	Lost int
	// Unresolved counts the operations that got no final answer, even after
	// the final round of retries with the same keys.
	Unresolved int
	// Refused counts the operations answered with a final refusal (400 or
	// 402), whether or not the ledger holds a payment under their key:
	// every operation asks for a valid payment within a balance that never
	// runs out, so a refusal is the service failing it (told no, it may
	// have paid all the same), not an answer a run may end on.
	Refused int
	// Overwritten counts the operations whose client, once answered with
	// a payment, was later answered (by a retry, a concurrent duplicate,
	// or the replay of every answered operation after the cell) with a
	// payment the ledger holds as made before it: the stored answer was
	// overwritten by a stale holder, an instance whose claim was taken
	// over (paused past its lease, say) and that completed it all the same
	// after the newer holder had, so that a replay now contradicts what a
	// client was told. A later answer naming a newer payment is an
	// operation run again after it was answered, which Doubles counts.
	Overwritten int
	// Strays counts payments under keys the client never used.
	Strays int
	// Mismatched counts payments under an operation's key whose amount,
	// currency or recipient is not what the operation asked for.
	Mismatched int
	// BalanceOff sums, over the currencies, how far the balance the ledger
	// reports is from the opening balance less its payments: 0 when the
	// ledger adds up.
	BalanceOff int64
}

// Clean reports whether the run shows exactly-once: no double, nothing
// lost, nothing unresolved, refused or overwritten, nothing stray, no payment other
// than asked, and a balance that adds up.
func (v Verdict) Clean() bool {
	return v.Doubles == 0 && v.Lost == 0 && v.Unresolved == 0 && v.Refused == 0 && v.Overwritten == 0 && v.Strays == 0 && v.Mismatched == 0 && v.BalanceOff == 0
}

// judge compares the client's view of ops with the ledger's payments and
// the balances it reports; every currency opened at opening.
func judge(ops []*op, payments []mockserver.Payment, opening int64, balances map[string]int64) Verdict {
	v := Verdict{Ops: len(ops), Payments: len(payments)}
	byKey := make(map[string]int, len(ops))
	keyOf := make(map[string]string, len(payments))   // payment ID -> its key
	made := make(map[string]time.Time, len(payments)) // payment ID -> when it was made
	paid := map[string]int64{}
	for _, p := range payments {
		byKey[p.IdempotencyKey]++
		keyOf[p.ID] = p.IdempotencyKey
		made[p.ID] = p.Created
		paid[p.Currency] += p.Amount
	}
	known := make(map[string]*op, len(ops))
	for _, o := range ops {
		known[o.key] = o
		if n := byKey[o.key]; n > 1 {
			v.Doubles += n - 1
		}
		o.mu.Lock()
		for id := range o.ids {
			if k, ok := keyOf[id]; !ok || k != o.key {
				v.Lost++
				break
			}
		}
		if overwritten(o.answers, made) {
			v.Overwritten++
		}
		if !o.resolved {
			v.Unresolved++
		}
		if o.final != 0 {
			v.Refused++
		}
		o.mu.Unlock()
	}
	for k, n := range byKey {
		if known[k] == nil {
			v.Strays += n
		}
	}
	for _, p := range payments {
		if o := known[p.IdempotencyKey]; o != nil && (p.Amount != o.amount || p.Currency != o.currency || p.Recipient != o.recipient) {
			v.Mismatched++
		}
	}
	// Every currency the ledger lists a balance for counts, not only those
	// it lists payments in: a balance taken down by a payment the ledger
	// no longer holds shows only there.
	for c, p := range paid {
		b, ok := balances[c]
		if !ok {
			b = opening // a ledger that lists no balance for a currency it paid in
		}
		v.BalanceOff += abs(b - (opening - p))
	}
	for c, b := range balances {
		if _, ok := paid[c]; !ok {
			v.BalanceOff += abs(b - opening)
		}
	}
	return v
}

// overwritten reports whether an answer of answers (payment IDs in the
// order they came) names a payment made before one an earlier answer
// named. An ID the ledger does not hold (made lacks it) is Lost's.
func overwritten(answers []string, made map[string]time.Time) bool {
	for i, earlier := range answers {
		e, ok := made[earlier]
		if !ok {
			continue
		}
		for _, later := range answers[i+1:] {
			if l, ok := made[later]; ok && l.Before(e) {
				return true
			}
		}
	}
	return false
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
