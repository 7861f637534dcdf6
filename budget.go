package saferetry

import "sync/atomic"

// budget is a token bucket that bounds retries across all operations of one
// Transport, in the spirit of gRPC retry throttling and the AWS SDK retry
// quota: while the server fails, retries drain the bucket and stop; while it
// answers, successes refill it. A nil *budget allows every retry.
type budget struct {
	capacity int64
	cost     int64
	tokens   atomic.Int64
}

func newBudget(capacity, cost int) *budget {
	if capacity <= 0 {
		return nil
	}
	b := &budget{capacity: int64(capacity), cost: int64(cost)}
	b.tokens.Store(b.capacity)
	return b
}

// retryCost is the price of one retry: double after a transport error or
// timeout, which costs the server (and the caller) more than an answer.
func (b *budget) retryCost(transportErr bool) int64 {
	if b == nil {
		return 0
	}
	if transportErr {
		return 2 * b.cost
	}
	return b.cost
}

// spend takes n tokens and reports true, or takes none and reports false
// when fewer than n are left.
func (b *budget) spend(n int64) bool {
	if b == nil {
		return true
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

// refund returns n tokens, never filling past capacity.
func (b *budget) refund(n int64) {
	if b == nil || n <= 0 {
		return
	}
	for {
		have := b.tokens.Load()
		if have >= b.capacity {
			return
		}
		next := min(have+n, b.capacity)
		if b.tokens.CompareAndSwap(have, next) {
			return
		}
	}
}

// succeeded refills the bucket after an operation ended with an answer that
// is not a failure: 1 token if it took no retry, else what its retries cost.
func (b *budget) succeeded(spent int64) {
	if spent == 0 {
		spent = 1
	}
	b.refund(spent)
}

// available reports the tokens left; it is for tests and diagnostics.
func (b *budget) available() int64 {
	if b == nil {
		return -1
	}
	return b.tokens.Load()
}
