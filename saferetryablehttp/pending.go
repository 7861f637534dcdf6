package saferetryablehttp

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// pendingRetry is the cost of the retry that checkRetry allowed for one
// request, and so paid from the budget, from the decision until
// retryablehttp makes the retry or is seen not to. A budget pays for
// retries made, as the Transport's Forgo has it, but retryablehttp tells
// neither when the request's context cuts its wait short nor when a
// CheckRetry of the caller's around Configure's stops the retry. The cost
// goes back:
//
//   - when the context ends first (an AfterFunc of it);
//   - when Do is seen to end before the retry (see rhOp.forgoRetry): its
//     ErrorHandler runs, PrepareRetry fails, a hook panics, or
//     retryablehttp asks CheckRetry about the answer again;
//   - when the answer is closed before the retry (see heldBody), which is
//     all that is seen of a Do that returns it as the outcome (a
//     CheckRetry around Configure's stopped the retry without an error).
//     retryablehttp closes an answer it retries too, before its Backoff
//     chooses the wait: the Backoff takes again what the Close gave back
//     (see pay), or, with a Backoff of the caller's, the retry's
//     RequestLogHook. What went back is what the bucket took of the cost,
//     less when it filled up meanwhile: taking the whole cost again would
//     charge the retry twice. An answer without a body (http.NoBody),
//     which is not wrapped, gives the cost back as soon as it is decided,
//     as if closed then.
//
// It is kept in the request's rhOp, one attempt after another.
type pendingRetry struct {
	budget *retrypolicy.Budget // what paid: a client configured twice has a hook of the first adapter see the second's payments
	cost   int64               // what the retry cost
	state  *retrypolicy.State  // the request's, whose Spent counts cost
	// ctx is the request's context, whose end gives cost back, from hold
	// until the retry is made or is seen not to be; nil otherwise.
	ctx context.Context
	// forgo, while cost is held, stops the refund that ctx's end makes,
	// and reports whether it did (false: the refund was made). A nil
	// forgo with a ctx is a cost that the answer's Close gave back: pay
	// takes again lent, what of it the budget took back (see
	// Budget.Refund).
	forgo func() bool
	lent  int64
}

// hold keeps cost, which the decision took from b and counted in st,
// until the retry is made or is seen not to be.
func (p *pendingRetry) hold(ctx context.Context, b *retrypolicy.Budget, cost int64, st *retrypolicy.State) {
	*p = pendingRetry{budget: b, cost: cost, state: st, ctx: ctx}
	p.forgo = context.AfterFunc(ctx, func() { b.Refund(cost) })
}

// giveBack returns the cost held, if any, to the budget that paid it and
// takes it off the request's Spent, keeping in lent how many tokens the
// budget took back (0 when the context's end made the refund), for pay.
func (p *pendingRetry) giveBack() {
	if p.forgo == nil {
		return
	}
	if p.forgo() {
		p.lent = p.budget.Refund(p.cost)
	}
	p.state.Spent -= p.cost
	p.forgo = nil
}

// pay takes again what the answer's Close gave back of the cost, now that
// retryablehttp goes on to the retry. The decision found it in the
// budget; only the drain of the answer ran since, so it is taken even if
// other requests spent the bucket meanwhile, rather than the retry going
// unpaid. A context already done makes no retry and is not charged.
func (p *pendingRetry) pay() {
	if p.ctx == nil || p.forgo != nil {
		return // nothing given back
	}
	lent := p.lent
	if p.ctx.Err() != nil {
		*p = pendingRetry{}
		return
	}
	p.budget.Take(lent)
	p.state.Spent += p.cost
	p.hold(p.ctx, p.budget, p.cost, p.state)
}

// retried is called before a retry that checkRetry allowed is sent, once
// the caller's RequestLogHook has let it go: the cost of the retry stays
// spent, unless the context ended first and its refund is made (and the
// retry, sent on a done context, fails unsent).
func (st *rhOp) retried() {
	p := &st.retry
	p.pay() // a Backoff of the caller's did not
	if p.forgo != nil && !p.forgo() {
		p.state.Spent -= p.cost
	}
	*p = pendingRetry{}
}

// forgoRetry gives back the cost of the retry that checkRetry allowed for
// st (nil: none known), to the budget that paid it, when retryablehttp is
// not going to make it after all (see pendingRetry). A retry already
// sent, or refunded by the context's end, is left as it is.
func (st *rhOp) forgoRetry() {
	if st == nil {
		return
	}
	st.retry.giveBack()
	st.retry = pendingRetry{}
}

// heldBody is the body of an answer whose retry's cost is held: its
// first Close gives the cost back (see pendingRetry). Like net/http's
// bodies, it may be closed from several goroutines at once (a Close that
// cuts a read short beside the reader's own).
type heldBody struct {
	io.ReadCloser
	st     *rhOp
	closed atomic.Bool
}

func (b *heldBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.st.retry.giveBack()
	}
	return b.ReadCloser.Close()
}
