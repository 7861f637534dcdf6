package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// Configure gives an existing go-retryablehttp client the saferetry rules:
//
//   - keys: before the first attempt of each logical request, a key from
//     [saferetry.WithKey] or a generated one (POST and PATCH by default, see
//     [WithKeyMethods]) is put in the request's Idempotency-Key header,
//     where it stays unchanged for all of retryablehttp's retries. A key
//     already in the header wins. Supplied keys are validated and an
//     invalid one fails before sending. A retry whose header no longer
//     carries the first attempt's key (a PrepareRetry or RequestLogHook
//     of yours dropped or changed it, or left it invalid) is not sent:
//     the request ends as when its last attempt got no answer, with that
//     key, not in [saferetry.ErrInvalidKey].
//   - classification: CheckRetry makes the saferetry Transport's decision
//     (408, 409, 429 and 5xx except 501 retried, unless the answer is a
//     replay, which is final whatever its status; Stripe-Should-Retry true
//     or false overriding the status rule but for 400 and 422, final
//     always; other statuses final; TLS verification, a TLS handshake the server refuses for the
//     client's configuration, and client-side errors such as redirect
//     limits or a redirect leaving the origin final; an attempt cut by http.Client.Timeout
//     retried like a timeout; unsafe methods without a key never retried),
//     with the [saferetry.Classifier] if any, the attempt count (RetryMax)
//     and the retry budget, which counts as the Transport's does (see
//     [WithRetryBudget]).
//   - waits: Backoff grows exponentially from RetryWaitMin to
//     RetryWaitMax with jitter; on 409, 429 and 503 it waits at least
//     what Retry-After asks for, capped by [WithMaxRetryAfter] and
//     jittered (a shorter Retry-After, such as 0, does not shorten it).
//   - outcome: ErrorHandler returns the last response with a nil error
//     when retries are exhausted, instead of "giving up" (as for any
//     answer, [saferetry.ReasonFromResponse] tells why the request ended
//     on it: the limit that gave up, a final status, a CheckRetry of
//     yours set around Configure's); with no response
//     it returns a [*saferetry.Error] with the key, the attempt count and
//     what stopped the retries (its Reason, as the Transport's errors
//     have it: [saferetry.ReasonClassifier] when a CheckRetry of yours
//     set around Configure's stopped them), matching
//     [saferetry.ErrOutcomeUnknown] if any attempt may have reached the
//     server and [saferetry.ErrNotSent] otherwise. The
//     error of a request's ResponseHandler is final and returned as it
//     is; the answer it was given counts once, as any answer.
//
// The caller's request is modified, as retryablehttp itself does: on the
// first attempt, the Header field of the *retryablehttp.Request's
// *http.Request is replaced by a copy that carries the key (the map the
// caller built is never written, so a map shared by several requests stays
// clean), and its context by a child that carries the request's retry
// state. Doing the same *retryablehttp.Request again therefore repeats the
// same operation under the same key; build a new request for a new one.
// Do not do one request from several goroutines at once (retryablehttp
// does not allow that either).
//
// It sets CheckRetry, Backoff and ErrorHandler, replacing any of yours
// (an ErrorHandler you set afterwards replaces its own: it is given the
// outcome above as its error, and the last answer to close), wraps
// RequestLogHook (the
// previous hook still runs; replacing it afterwards loses the per-request
// state), and ResponseLogHook and PrepareRetry if set (see below),
// replaces HTTPClient by a copy whose Transport validates keys and
// records what each attempt did (nil HTTPClient or Transport means
// http.DefaultTransport), and sets RetryMax as [WithMaxAttempts] says.
// RetryWaitMin, RetryWaitMax, Logger and HTTPClient.Timeout stay yours
// and are read when a request runs. Call it after setting those fields,
// the hooks and PrepareRetry yourself and before the client is used.
// Call it once per client: a second call wraps what the first set (its
// hooks and Transport) and replaces the rest, so the key and redirect
// rules of both apply, and the retry decisions and budget are the
// second's.
//
// A retry that CheckRetry allowed, and so paid from the retry budget, and
// that retryablehttp then does not make, costs nothing: the cost goes
// back when the request's context ends during the wait, when
// PrepareRetry fails, and when a CheckRetry of yours set around
// Configure's stops the retry (when Do ends: its answer, which it then
// returns, is closed, or its ErrorHandler runs, given the attempt's
// error, Configure's, or one that wraps either; given another, only when
// the request's context ends). A hook that Configure wraps and that panics
// (ResponseLogHook, which gets the answer open, PrepareRetry,
// RequestLogHook before a retry) sends its panic on to the caller as it
// was, as the saferetry Transport does, once the answer is closed and the
// retry's cost given back. What Configure does not wrap is not seen: a
// hook or PrepareRetry set after Configure, the Logger, and a request
// body's ReaderFunc failing to rewind it, which retryablehttp returns
// without a hook; a retry they stop gives its cost back only when the
// request's context ends (never, for a context that cannot end), unless
// it is a PrepareRetry failing after an answer, which Configure's
// ErrorHandler sees, and an answer open when one of them panics stays
// open.
//
// Its Backoff is not given the context, so CheckRetry refuses a retry when
// the longest wait Backoff could choose would end past the context
// deadline, and the last outcome is returned at once. A limit that comes
// from retryablehttp itself: a context canceled during a wait makes it
// return the bare context error, without the key.
func Configure(c *retryablehttp.Client, opts ...Option) {
	a := newAdapter(c, newConfig(opts))

	hc := new(http.Client)
	if c.HTTPClient != nil {
		*hc = *c.HTTPClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &rhTransport{base: base, a: a}
	c.HTTPClient = hc

	switch {
	case a.cfg.maxAttempts > 0:
		c.RetryMax = a.cfg.maxAttempts - 1
	case c.RetryMax == newClientRetryMax:
		c.RetryMax = saferetry.DefaultMaxAttempts - 1
	}

	a.wrapHooks()
	c.CheckRetry = a.checkRetry
	c.Backoff = a.backoff
	c.ErrorHandler = a.errorHandler
}

// newClientRetryMax is the RetryMax that retryablehttp.NewClient sets (its
// unexported defaultRetryMax).
const newClientRetryMax = 4

// adapter holds what the configured client's hooks share.
type adapter struct {
	c      *retryablehttp.Client
	cfg    *config
	policy retrypolicy.Policy
	cut    cutAttempts // the requests of attempts cut by HTTPClient.Timeout, whose retry is paid
}

func newAdapter(c *retryablehttp.Client, cfg *config) *adapter {
	a := &adapter{c: c, cfg: cfg}
	a.policy = retrypolicy.Policy{
		MaxRetryAfter: cfg.maxRetryAfter,
		Classify:      retrypolicy.Classifier(cfg.classifier),
		Budget:        retrypolicy.NewBudget(cfg.budgetCapacity, cfg.budgetCost),
		// The decision sees the longest wait Backoff may draw, and
		// Backoff draws the wait itself: it is not given the request.
		NewBackoff: func() backoff.BackOff { return &longestWait{c: c} },
		Jitter:     nil,
	}
	return a
}

// beforeAttempt runs before every attempt of a request, retry counting
// from 0, and returns the request's retry state (nil if it has none): the
// first one gets the key and the state.
func (a *adapter) beforeAttempt(r *http.Request, retry int) *rhOp {
	if retry == 0 {
		st := &rhOp{}
		st.keyErr = a.attachKey(r)
		// CheckRetry gets the request's context and nothing else of it:
		// the operation's state travels there.
		*r = *r.WithContext(context.WithValue(r.Context(), rhOpCtxKey{}, st))
	}
	st := rhOpFrom(r.Context())
	if st != nil {
		st.state.Attempt = retry + 1
	}
	return st
}

// errorHandler is the client's ErrorHandler: the last response when there
// is one, else the operation's [*saferetry.Error]. Do ends here, so a
// retry that CheckRetry allowed is not made (a CheckRetry set around
// Configure's stopped it, or a PrepareRetry set after Configure failed):
// its cost goes back to the budget, when the last answer or the last
// attempt's error tells the request.
//
// An Error without a Reason is that of an attempt that CheckRetry would
// have retried (see checkRetry): past RetryMax attempts, retryablehttp
// gave up on it by itself, which the Error names as the Transport names
// its attempt limit ([saferetry.ReasonMaxAttempts]); otherwise a
// CheckRetry set around Configure's stopped it, the caller's own
// decision, which the Error names as it names a [saferetry.Classifier]'s
// ([saferetry.ReasonClassifier]). Such a CheckRetry may return the
// attempt's error, or none, rather than Configure's CheckRetry's: the
// Error is made from the attempt's (net/http's, after an attempt that
// HTTPClient.Timeout cut: see cutAttempts), and names the Reason of Configure's
// decision when that decision retried nothing (the wrapper stopped
// nothing).
func (a *adapter) errorHandler(resp *http.Response, err error, attempts int) (*http.Response, error) {
	st := respOp(resp)
	var ae *attemptError
	if resp == nil && errors.As(err, &ae) {
		st = rhOpFrom(ae.req.Context())
	}
	var cut *rhOp // the request of an attempt that HTTPClient.Timeout cut
	if st == nil && resp == nil {
		cut = a.cut.take(err)
		st = cut
	}
	st.forgoRetry()
	if err == nil && resp != nil {
		return resp, nil
	}
	if resp != nil {
		// net/http returns the last response along with a redirect
		// policy error; the error is the outcome.
		retrypolicy.Drain(resp.Body)
	}
	// CheckRetry made the outcome of an attempt without a response an
	// *Error; an invalid key comes as one from rhTransport.
	var e *saferetry.Error
	switch {
	case errors.As(err, &e):
	case ae != nil:
		e = st.outcome(retrypolicy.UnderContextErr(ae.req.Context(), err), ae)
	case cut != nil:
		// net/http's error of the attempt, as checkRetry would have
		// made the outcome of it.
		e = cut.outcome(retrypolicy.UnderContextErr(cut.req.Context(), err), nil)
	default:
		return nil, err
	}
	if e.Cause != saferetry.ErrInvalidKey {
		e.Attempts = attempts
		switch {
		case e.Reason != "":
		case st != nil && st.stopped != 0:
			e.Reason = saferetry.Reason(st.stopped.String())
		case attempts > a.c.RetryMax:
			e.Reason = saferetry.ReasonMaxAttempts
		default:
			e.Reason = saferetry.ReasonClassifier
		}
	}
	return nil, e
}

// backoff is the client's Backoff: an exponential wait, or the wait
// Retry-After asks for when that is longer (see Policy.Decide).
// retryablehttp calls it once it goes on to a retry, after it closed the
// answer: the retry's cost, given back then, is paid again (see
// pendingRetry).
func (a *adapter) backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if st := respOp(resp); st != nil {
		st.retry.pay()
	}
	d := exponentialWait(minWait, maxWait, attempt)
	if ra, _, ok := retrypolicy.RetryAfter(resp, time.Now(), a.cfg.maxRetryAfter, retrypolicy.Jitter); ok {
		d = max(d, ra)
	}
	return d
}
