package idempotency

import "context"

// declined is the hold of a request whose claim the store declined
// (ErrClaimDeclined): it holds nothing. The handler answers the request
// without a claim, into a recorder that streams past the response limit
// as in lease mode, so that the event, given before the answer goes out,
// has its status; nothing of the answer is stored, and there is no claim
// to renew, complete or release.
type declined struct{}

func (declined) start(q *request, _ ClaimResult) (context.Context, bool) {
	q.rec = recorder{w: q.writer(), limit: q.m.cfg.maxResponse, canStream: true}
	return q.r.Context(), true
}

// handlerContext is the request's own context, which carries no claim:
// TokenFromContext reports none.
func (declined) handlerContext(c *claimCtx) context.Context { return c.Context }

func (declined) finish(q *request) {
	ev := q.event()
	ev.Outcome, ev.Status = OutcomeDeclined, q.rec.statusCode()
	q.m.answer(ev, nil, q.send)
}

// abort gives the event of a handler that panicked, with the status sent
// (0 unless its answer streamed); the panic goes on, not a hook's (see
// middleware.emitUnwinding).
func (declined) abort(q *request) {
	ev := q.event()
	ev.Outcome, ev.Status, ev.Err = OutcomeDeclined, q.sentStatus(), ErrHandlerPanicked
	q.m.emitUnwinding(ev)
}
