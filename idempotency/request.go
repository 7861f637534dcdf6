package idempotency

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"
)

// request is one protected request on its way through the Middleware:
// everything the steps after admission need, in one allocation. The hold of
// a claim it acquires is a second one, made by its mode (leaseClaim,
// txClaim), so that a replay, a 409 or a 422 does not pay for it.
type request struct {
	m  *middleware
	r  *http.Request
	fp string

	// began is the admission's time, when a hook will want the events'
	// Duration (timed): as the time since the Middleware's epoch (see
	// middleware.since), which keeps the request in its size class
	// (TestRequestSizes).
	began time.Duration

	body restoredBody
	// rec is the writer the handler writes to; its w, the request's own
	// ResponseWriter (see writer), is set from admission on, so that the
	// request keeps it once.
	rec      recorder
	wait     *waiter  // made at the first wait
	claim    claimCtx // the request's key (from admission), and the handler's context and the token of the claim it runs under
	tookOver bool     // the claim was taken over from a holder whose lease lapsed
	timed    bool     // began is set
	answered bool     // the handler's response, or an answer in its place, was written to w
	repeat   bool     // the key was found claimed or completed with q's fingerprint (see Event.Repeat)
	tx       *txClaim // transactional mode's hold of the claim, made when needed
	// outer is a copy of the response headers set before the handler ran
	// (by handlers around the Middleware), nil when there were none: an
	// answer given in the handler's place has these and none of its own
	// (see answerInPlace).
	outer http.Header
}

// writer is the request's ResponseWriter, which answers in the handler's
// place are written to.
func (q *request) writer() http.ResponseWriter { return q.rec.w }

// restoredBody replays the bytes read from a request body to the handler.
type restoredBody struct{ bytes.Reader }

func (*restoredBody) Close() error { return nil }

// mode claims a request's key and holds the claim while the handler runs:
// lease mode over a Store, transactional mode over a TxStore.
type mode interface {
	// claim asks the store for q's key. When res is Acquired, held holds
	// it; otherwise res.Entry is the entry in the way. An error means the
	// store could not answer (nothing is held).
	claim(q *request) (held held, res ClaimResult, err error)
}

// held is a claim that a request holds while its handler runs.
type held interface {
	// start readies the run under the claim res and returns the parent of
	// the handler's context; ok false means the request was answered
	// instead and the claim let go.
	start(q *request, res ClaimResult) (parent context.Context, ok bool)
	// handlerContext returns the handler's context, made from c, the
	// request's context carrying the claim.
	handlerContext(c *claimCtx) context.Context
	// finish records the outcome the handler wrote and sends its response.
	finish(q *request)
	// abort lets go of the claim after the handler panicked; the panic goes
	// on once it returns.
	abort(q *request)
}

// serve claims the key, runs the handler under the claim, or answers from
// the entry in the way (waiting for it to settle, with WithWaitForResult),
// and ends its wait, if any. Should a panic go on meanwhile (the store's,
// a hook's, the handler's), the end of the wait is cleanup after it: a
// panic of the store's there (its Watch's stop) is dropped (see unwinding).
func (q *request) serve() {
	served := false
	defer func() {
		switch {
		case q.wait == nil:
		case served:
			q.wait.done(q.m)
		default:
			q.m.unwinding(q.r.Context(), q.claim.key, func() { q.wait.done(q.m) })
		}
	}()
	q.claimAndServe()
	served = true
}

// claimAndServe is serve's work, for serve to end the wait after it.
func (q *request) claimAndServe() {
	for {
		h, res, err := q.claimKey()
		if q.wait != nil && (err != nil || res.Acquired) {
			// It waited, and won the key or lost the store: its waiting
			// slot and watch are not needed while the handler runs
			// (unprotected, under WithFailOpen). Ending them is cleanup
			// of the wait: a panic of the store's there (its Watch's
			// stop) is dropped (see unwinding), since going on with it
			// would leave the request no event, and a claim it holds
			// (a transaction, in transactional mode) never let go of.
			q.m.unwinding(q.r.Context(), q.claim.key, func() { q.wait.done(q.m) })
		}
		if errors.Is(err, ErrClaimDeclined) {
			q.run(declined{}, ClaimResult{})
			return
		}
		if err != nil {
			q.storeFailed(err)
			return
		}
		if res.Acquired {
			q.run(h, res)
			return
		}
		if !q.refused(res.Entry) {
			return
		}
	}
}

// claimKey asks the store for q's key (see mode). Should the store panic,
// the request gives its one event first (see askPanicked), and the panic
// goes on.
func (q *request) claimKey() (h held, res ClaimResult, err error) {
	claimed := false
	defer func() {
		if !claimed {
			q.askPanicked()
		}
	}()
	h, res, err = q.m.mode.claim(q)
	claimed = true
	return h, res, err
}

// pause waits for the entry e in the way to settle (see waiter.pause), and
// reports whether to claim again. Should the store panic meanwhile (its
// Watch), the request gives its one event first (see askPanicked), and
// the panic goes on.
func (q *request) pause(e Entry) bool {
	paused := false
	defer func() {
		if !paused {
			q.askPanicked()
		}
	}()
	again := q.waiter().pause(q.r.Context(), q.m, q.claim.key, e)
	paused = true
	return again
}

// askPanicked gives the one event of a request whose store panicked while
// it asked about its key, before it held a claim or answered:
// OutcomeStoreError with no status (nothing was sent) and no token
// (nothing is held). The only code of another's that runs meanwhile is
// the logger, after a store call that failed (a transaction's Rollback, a
// Watch): a store failure as well, which the label tells true. A hook's
// panic does not replace the store's (see middleware.emitUnwinding).
func (q *request) askPanicked() {
	q.m.emitUnwinding(q.eventOf(Event{Outcome: OutcomeStoreError, Key: q.claim.key, Err: errStorePanicked}))
}

// run runs the handler under the claim h holds.
func (q *request) run(h held, res ClaimResult) {
	q.claim.token = res.Token
	q.tookOver = res.TookOver
	parent, ok := h.start(q, res)
	if !ok {
		return
	}
	if oh := q.writer().Header(); len(oh) > 0 {
		q.outer = oh.Clone()
	}
	ran, finished := false, false
	defer func() {
		if finished {
			return
		}
		// A panic in the handler, or after it returned in what finish
		// calls before the answer goes out (the store's Complete or
		// Commit, a logger): nothing the handler buffered goes out, so
		// neither do its headers. (A hook's panic on the event comes
		// after the answer the event describes went out: see
		// middleware.answer.) Whatever answers in its place
		// (net/http's abort, a recovery handler around the Middleware)
		// finds the header map as it was before the handler ran, not a
		// Set-Cookie or a Content-Length of a body never sent.
		if q.rec.unsent() && !q.answered {
			q.answerInPlace()
		}
		if !ran {
			h.abort(q) // finish lets go of the claim itself when it panics
		}
	}()
	q.claim.Context = parent
	q.m.next.ServeHTTP(&q.rec, q.r.WithContext(h.handlerContext(&q.claim)))
	ran = true
	h.finish(q)
	finished = true
}

// event is the Event of the claim the request holds, for its mode to
// complete with the outcome.
func (q *request) event() Event {
	return q.eventOf(Event{Key: q.claim.key, Token: q.claim.token, TookOver: q.tookOver})
}

// answer answers with write as ev about q (see eventOf) says (see
// middleware.answer). Without hooks it builds no event: a replay, a 409 or
// a 422 does not pay for an event nobody reads.
func (q *request) answer(ev Event, write func()) {
	if len(q.m.cfg.hooks) == 0 {
		write()
		return
	}
	q.m.answer(q.eventOf(ev), nil, write)
}

// send sends the handler's response as recorded (see recorder.flush).
func (q *request) send() {
	q.answered = true
	q.rec.flush()
}

// eventOf is ev about q.
func (q *request) eventOf(ev Event) Event {
	ev = admissionEvent(q.r, ev)
	ev.Repeat = q.repeat
	if q.timed {
		ev.began = q.m.epoch.Load().Add(q.began)
	}
	return ev
}
