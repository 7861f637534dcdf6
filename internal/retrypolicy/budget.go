package retrypolicy

import (
	"math"
	"sync/atomic"
)

// Budget is a token bucket that bounds retries across all operations of one
// client, in the spirit of gRPC retry throttling and the AWS SDK retry
// quota: while the server fails, retries drain the bucket and stop; while it
// answers, successes refill it. A nil *Budget allows every retry. It is safe
// for concurrent use.
type Budget struct {
	capacity int64
	cost     int64
	tokens   atomic.Int64
}

// NewBudget returns a full bucket of capacity tokens in which a retry costs
// cost tokens (cost < 1 is taken as 1), or nil, no budget, when capacity <= 0.
func NewBudget(capacity, cost int) *Budget {
	if capacity <= 0 {
		return nil
	}
	b := &Budget{capacity: int64(capacity), cost: int64(max(cost, 1))}
	b.tokens.Store(b.capacity)
	return b
}

// RetryCost is the price of one retry: double after a transport error or
// timeout, which costs the server (and the caller) more than an answer.
// Doubling a cost past the int64 range gives overRange, which no bucket
// pays (a full one of MaxInt64 tokens neither), never a wrapped-around
// price.
func (b *Budget) RetryCost(transportErr bool) int64 {
	if b == nil {
		return 0
	}
	if transportErr {
		if b.cost > math.MaxInt64/2 {
			return overRange
		}
		return 2 * b.cost
	}
	return b.cost
}

// overRange is the price of a retry that costs more than an int64 holds
// (see [Budget.RetryCost]); [Budget.Spend] never pays it.
const overRange = -1

// Spend takes n tokens and reports true, or takes none and reports false
// when fewer than n are left or n is overRange (any n < 0).
func (b *Budget) Spend(n int64) bool {
	if b == nil {
		return true
	}
	if n < 0 {
		return false
	}
	for {
		have := b.tokens.Load()
		if have < n {
			return false
		}
		if b.tokens.CompareAndSwap(have, have-n) {
			return true
		}
	}
}

// Refund returns n tokens, never filling past capacity (have+n could
// pass the int64 range; what is missing from capacity cannot, but for a
// bucket that Take left below zero, which n cannot take past capacity
// then), and reports how many went back: fewer than n when the bucket
// filled up.
func (b *Budget) Refund(n int64) int64 {
	if b == nil || n <= 0 {
		return 0
	}
	for {
		have := b.tokens.Load()
		if have >= b.capacity {
			return 0
		}
		back := n
		if have >= 0 || b.capacity <= math.MaxInt64+have {
			back = min(n, b.capacity-have)
		}
		if b.tokens.CompareAndSwap(have, have+back) {
			return back
		}
	}
}

// Take takes n tokens however many are left, the bucket going below zero
// if need be, for a retry that Spend paid, whose cost Refund gave back
// meanwhile (n being what it gave back), and that is made after all (see
// the go-retryablehttp adapter). A bucket below zero pays no retry until
// refills bring it back up.
func (b *Budget) Take(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.tokens.Add(-n)
}

// Succeeded refills the bucket after an operation ended with an answer that
// is not a failure: 1 token if it took no retry, else what its retries cost.
func (b *Budget) Succeeded(spent int64) {
	if spent == 0 {
		spent = 1
	}
	b.Refund(spent)
}

// Available reports the tokens left, or -1 for a nil Budget; it is for
// tests and diagnostics.
func (b *Budget) Available() int64 {
	if b == nil {
		return -1
	}
	return b.tokens.Load()
}
