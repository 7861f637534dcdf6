package saferetryablehttp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// rhOp is the state of one logical request through a retryablehttp client,
// kept in its context from the first attempt on. Attempts of one request
// run one after the other, so it needs no lock.
type rhOp struct {
	state  retrypolicy.State // state.Attempt counts the attempts made
	req    *http.Request     // the last attempt's request, as sent
	key    string            // the last attempt's key: its last hop's, or opKey for a retry refused for its key
	opKey  string            // the first attempt's key, which its retries keep
	keyErr error             // the supplied key is invalid: nothing is sent
	sent   bool              // some attempt may have reached the server
	// stopped is the Reason of the last decision when it retried
	// nothing, 0 when it retried: a CheckRetry of the caller's around
	// Configure's may end the request on it without Configure's error,
	// which names it (see errorHandler). It fills what sent leaves of a
	// word, which keeps rhOp in its size class.
	stopped retrypolicy.Reason
	// final is the answer that checkRetry found final: retryablehttp
	// asks about it again, with the error of the request's
	// ResponseHandler, and one answer settles the budget once.
	final *http.Response
	retry pendingRetry // the retry checkRetry allowed and paid, until it is made
	// written is the context of the last attempt's last hop, which its
	// answer's Request carries: checkRetry records there why the request
	// ends on the answer (see saferetry.ReasonFromResponse).
	written *retrypolicy.Written
}

type rhOpCtxKey struct{}

func rhOpFrom(ctx context.Context) *rhOp {
	st, _ := ctx.Value(rhOpCtxKey{}).(*rhOp)
	return st
}

// checkRetry is the client's CheckRetry: the retry decision of the
// Transport, on the attempt that retryablehttp reports.
func (a *adapter) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	st := rhOpFrom(ctx)
	// A retry still held was not made: retryablehttp asks again about
	// the same answer (for a ResponseHandler) only when it is not
	// retrying it.
	st.forgoRetry()
	if st != nil && resp != nil && resp == st.final {
		return false, nil // the ResponseHandler's error is final as it is
	}
	o, ae, ok := attemptOutcome(st, resp, err)
	if !ok {
		return false, nil
	}
	var outcome error // the operation's error if this attempt is the last
	var oe *saferetry.Error
	if o.Response == nil {
		oe = st.outcome(retrypolicy.UnderContextErr(ctx, err), ae)
		outcome = oe
	}
	if o.Request == nil {
		return false, outcome
	}
	s := &retrypolicy.State{}
	if st != nil {
		s = &st.state
		s.Deadline, _ = ctx.Deadline()
	} // else: without the hook's state only this attempt is known
	s.MaxAttempts = a.c.RetryMax // RetryMax+1, the first attempt included
	if s.MaxAttempts < math.MaxInt {
		s.MaxAttempts++ // math.MaxInt stays: RetryMax+1 would wrap around
	}
	s.UnsafeNoKey = o.Request.Header.Get(saferetry.HeaderIdempotencyKey) == "" &&
		!retrypolicy.RetriedWithoutKey(o.Request.Method)
	s.Done = ctx.Err() != nil
	v := a.decide(o, s)
	if st != nil {
		st.stopped = 0
		if !v.Retry {
			st.stopped = v.Reason
		}
	}
	if oe != nil && !v.Retry {
		// A retry's reason did not stop anything: its error is the
		// outcome only if retryablehttp gives up on it by itself (see
		// errorHandler).
		oe.Reason = saferetry.Reason(v.Reason.String())
	}
	if !v.Retry && st != nil && err == nil {
		st.final = resp
	}
	if st != nil && o.Response != nil {
		st.answered(resp, v)
	}
	if v.Retry && st != nil && v.Cost() > 0 {
		// retryablehttp may not make the retry: the cost is held until
		// it does (see pendingRetry).
		st.retry.hold(ctx, a.policy.Budget, v.Cost(), &st.state)
		switch {
		case resp != nil && resp.Body == http.NoBody:
			// An answer without a body keeps http.NoBody, which
			// callers compare its Body against, and so tells nothing
			// when it is closed: the cost goes back at once, as a
			// held body's Close gives it back, and is paid again if
			// retryablehttp goes on to the retry (see pendingRetry).
			st.retry.giveBack()
		case resp != nil:
			resp.Body = &heldBody{ReadCloser: resp.Body, st: st}
		case ae == nil:
			// net/http's error of an attempt it cut: errorHandler
			// finds the request by it (see cutAttempts).
			a.cut.link(err, st)
		}
	}
	// The error is kept by retryablehttp only if the retries end here; it
	// then reaches ErrorHandler as the outcome.
	return v.Retry, outcome
}

// answered records, for saferetry.ReasonFromResponse, why the request
// ends on resp if it does: the decision's Reason, or, for an answer the
// decision retries, that a CheckRetry of the caller's around Configure's
// kept it from the retry (the caller's own decision, as a Classifier's
// is), since retryablehttp returns such an answer only then. It writes to
// the adapter's own context only, not to that of a saferetry Transport
// under it, which keeps its operation's.
func (st *rhOp) answered(resp *http.Response, v retrypolicy.Verdict) {
	if st.written == nil || resp.Request == nil || retrypolicy.Of(resp.Request.Context()) != st.written {
		return
	}
	r := v.Reason
	if v.Retry {
		r = retrypolicy.ReasonClassifier
	}
	st.written.SetReason(r)
}

// decide is the policy's decision on o. The classifier is the caller's
// code: should it panic, the panic goes on as it is, but the answer it
// was given is closed first, as the Transport closes it, since
// retryablehttp, which drains it after CheckRetry, does not (a caller
// that recovers, as net/http's server does for a handler, would be left
// with its connection held). The classifier runs before any cost is
// spent, so the budget has nothing to refund (see guard).
func (a *adapter) decide(o retrypolicy.Outcome, s *retrypolicy.State) (v retrypolicy.Verdict) {
	if a.policy.Classify == nil {
		return a.policy.Decide(o, s, time.Now)
	}
	guard(nil, o.Response, func() { v = a.policy.Decide(o, s, time.Now) })
	return v
}

// attemptOutcome makes the outcome of the attempt that retryablehttp
// reports as (resp, err). ok is false when there is nothing to decide: the
// key is invalid (ErrorHandler returns its error) or err is not a round
// trip's (a redirect limit, a bad URL or a CheckRedirect refusal, which
// net/http returns with the last response, or the error a request's
// ResponseHandler returned for the answer), final as it is.
func attemptOutcome(st *rhOp, resp *http.Response, err error) (o retrypolicy.Outcome, ae *attemptError, ok bool) {
	switch {
	case err == nil && resp != nil:
		o = retrypolicy.Outcome{Request: resp.Request, Response: resp}
	case errors.As(err, &ae):
		if ae.invalidKey {
			return o, nil, false
		}
		o = retrypolicy.Outcome{Request: ae.req, Err: err}
	case resp == nil && st != nil && st.req != nil && isTimeout(err):
		// net/http replaced the attempt's error by its own when
		// http.Client.Timeout expired: an attempt timeout. With an
		// answer, the error is the request's ResponseHandler's (its read
		// of the body may time out), final as it is.
		o = retrypolicy.Outcome{Request: st.req, Err: err, TimedOut: true}
	default:
		return o, nil, false
	}
	if o.Request == nil && st != nil {
		o.Request = st.req
	}
	return o, ae, true
}

// outcome is the error of a request whose last attempt, which failed with
// err, ends it: [saferetry.ErrOutcomeUnknown] if any attempt may have
// reached the server, else [saferetry.ErrNotSent]. ae, when not nil, is the
// attempt's own error. A redirect hop refused for leaving the origin is
// not sent, whatever its first hop got (an answer that sent it elsewhere),
// as with the Transport, where each hop is an operation of its own.
func (st *rhOp) outcome(err error, ae *attemptError) *saferetry.Error {
	e := &saferetry.Error{Cause: saferetry.ErrOutcomeUnknown, Err: err}
	if ae != nil && errors.Is(ae.err, saferetry.ErrCrossOriginRedirect) {
		e.Cause, e.Key = saferetry.ErrNotSent, ae.key
		if st != nil {
			e.Attempts = st.state.Attempt
		}
		return e
	}
	if st == nil {
		// Without the hook's state (RequestLogHook replaced), only this
		// attempt is known.
		if ae != nil {
			e.Key = ae.key
			if !ae.sent {
				e.Cause = saferetry.ErrNotSent
			}
		}
		return e
	}
	e.Key, e.Attempts = st.key, st.state.Attempt
	if !st.sent {
		e.Cause = saferetry.ErrNotSent
	}
	return e
}

// isTimeout reports a net/http timeout error.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
