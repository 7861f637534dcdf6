package saferetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/cenkalti/backoff/v4"
)

// Transport is an [http.RoundTripper] that makes each request one logical
// operation: it attaches an idempotency key (see [WithKey] and
// [WithKeyMethods]), sends the request, and retries retryable outcomes with
// the same key and body after a backoff or Retry-After wait, within the
// attempt limit, the context deadline and the retry budget.
//
// It keeps the RoundTripper contract: the caller's request is never
// modified (each attempt sends a clone), its body is closed on every path,
// a final response is returned with a nil error whatever its status, and
// an error comes without a response. An operation that ends without a
// response returns an [*Error] matching [ErrOutcomeUnknown] (or
// [ErrNotSent] when no attempt reached the server, as for a done context
// or an http(s) URL without a host, rejected before sending).
//
// Each RoundTrip is one operation: under a plain [http.Client], every hop
// of a redirect gets its own generated key. [Client.Do] instead chooses the
// key once, so that a POST redirected by 307 or 308 keeps it.
//
// Use [NewTransport]; the zero Transport is not usable. A Transport is safe
// for concurrent use by multiple goroutines; its retry budget is shared by
// all of them. Most callers want [NewClient] instead, which also turns
// error statuses into [*APIError].
type Transport struct {
	cfg    *config
	base   http.RoundTripper
	budget *budget
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport sending attempts through base; nil base
// means [http.DefaultTransport].
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	return newTransport(base, newConfig(opts))
}

func newTransport(base http.RoundTripper, cfg *config) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{cfg: cfg, base: base, budget: newBudget(cfg.budgetCapacity, cfg.budgetCost)}
}

// CloseIdleConnections closes idle connections of the base RoundTripper,
// when it has such a method.
func (t *Transport) CloseIdleConnections() { closeIdle(t.base) }

func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip runs one logical operation; see [Transport].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cfg := t.cfg
	if err := checkURL(req.URL); err != nil {
		closeRequestBody(req)
		return nil, &Error{Cause: ErrNotSent, Err: err}
	}
	key, wire, _, err := cfg.resolveKey(req)
	if err != nil {
		closeRequestBody(req)
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Cause: ErrNotSent, Err: err}
	}
	b, err := newBody(req, cfg.maxBufferedBody)
	if err != nil {
		return nil, &Error{Cause: ErrNotSent, Key: key, Err: err}
	}
	op := operation{t: t, req: req, ctx: req.Context(), key: key, wire: wire, body: b,
		unsafeNoKey: key == "" && !retriedWithoutKey(req.Method)}
	return op.run()
}

// operation is the state of one RoundTrip call.
type operation struct {
	t           *Transport
	req         *http.Request
	ctx         context.Context
	key, wire   string
	body        *body
	unsafeNoKey bool

	bo         backoff.BackOff
	spent      int64 // budget tokens spent by this operation's retries
	sent       bool  // some attempt may have reached the server
	lastStatus int
	lastErr    error // the last attempt's error, if it got no response, else nil
}

func (op *operation) run() (*http.Response, error) {
	cfg := op.t.cfg
	rc, err := op.body.next()
	if err != nil {
		return nil, op.fail(0, err)
	}
	for n := 1; ; n++ {
		if err := op.ctx.Err(); err != nil {
			// This attempt is not sent: with a done context the base
			// would fail it, and it would count as maybe sent.
			return nil, op.interrupted(n-1, err, rc)
		}
		actx, cancel := op.ctx, context.CancelFunc(nil)
		if cfg.attemptTimeout > 0 {
			actx, cancel = context.WithTimeout(op.ctx, cfg.attemptTimeout)
		}
		r := op.attemptRequest(actx, rc)
		resp, err := op.t.base.RoundTrip(r)
		switch {
		case err != nil && resp != nil:
			// A broken base; keep the contract towards our caller.
			drain(resp.Body)
			resp = nil
		case err == nil && resp == nil:
			err = errors.New("saferetry: base RoundTripper returned no response and no error")
		case resp != nil && resp.Body == nil:
			// Also a broken base (net/http promises a non-nil Body); the
			// caller, the drain and the attempt-timeout wrapper may close it.
			resp.Body = http.NoBody
		}

		a := Attempt{Request: r, Key: op.key, Number: n, Err: err}
		var retry, retryable, transportErr bool
		if resp != nil {
			op.lastStatus = resp.StatusCode
			op.lastErr = nil
			op.sent = true
			a.Status = resp.StatusCode
			retryable, a.Reason = classifyStatus(resp)
		} else {
			var sent bool
			op.lastErr = err
			retryable, a.Reason, sent = classifyError(actx, err)
			op.sent = op.sent || sent
			transportErr = true
		}
		retry = retryable
		if op.ctx.Err() != nil {
			retry, a.Reason = false, ReasonContextDone
		} else if d := cfg.classify(r, resp, err); d != DecisionDefault {
			retry, a.Reason = d == DecisionRetry, ReasonClassifier
		}
		next := rc
		if retry {
			next, retry = op.planRetry(&a, n, resp, transportErr)
		}
		if retry {
			a.Decision = DecisionRetry
		} else {
			a.Decision = DecisionReturn
		}
		cfg.observe(op.ctx, &a, retryable)

		if !retry {
			if resp != nil {
				if !retryable {
					op.t.budget.succeeded(op.spent)
				}
				op.finish(n, nil)
				if resp.Request == nil {
					resp.Request = r
				}
				if cancel != nil {
					resp.Body = withCancel(resp.Body, cancel)
				}
				return resp, nil
			}
			if cancel != nil {
				cancel()
			}
			return nil, op.fail(n, err)
		}
		if resp != nil {
			drain(resp.Body)
		}
		if cancel != nil {
			cancel()
		}
		if err := sleep(op.ctx, cfg.clock, a.Wait); err != nil {
			return nil, op.interrupted(n, err, next)
		}
		rc = next
	}
}

// planRetry applies the limits that can veto a retry (no key, body, attempt
// count, backoff, deadline, budget), chooses the wait and prepares the next
// body. It records the outcome in a and reports whether to retry.
func (op *operation) planRetry(a *Attempt, n int, resp *http.Response, transportErr bool) (next io.ReadCloser, retry bool) {
	cfg := op.t.cfg
	switch {
	case op.unsafeNoKey:
		a.Reason = ReasonNoKey
		return nil, false
	case !op.body.replayable:
		a.Reason = ReasonBodyNotReplayable
		return nil, false
	case n >= cfg.maxAttempts:
		a.Reason = ReasonMaxAttempts
		return nil, false
	}
	if op.bo == nil {
		op.bo = cfg.newBackoff()
	}
	wait := op.bo.NextBackOff()
	if wait == backoff.Stop {
		a.Reason = ReasonBackoffStop
		return nil, false
	}
	now := cfg.clock.Now()
	if ra, asked, ok := retryAfter(resp, now, cfg.maxRetryAfter, jitter); ok {
		wait, a.RetryAfter = ra, asked
		if a.Reason == ReasonRetryableStatus {
			a.Reason = ReasonRetryAfter
		}
	}
	if passesDeadline(op.ctx, now, wait) {
		a.Reason = ReasonDeadline
		return nil, false
	}
	cost := op.t.budget.retryCost(transportErr)
	if !op.t.budget.spend(cost) {
		a.Reason = ReasonBudgetExhausted
		return nil, false
	}
	rc, err := op.body.next()
	if err != nil {
		op.t.budget.refund(cost)
		a.Reason = ReasonBodyNotReplayable
		return nil, false
	}
	op.spent += cost
	a.Wait = wait
	return rc, true
}

// attemptRequest clones the caller's request for one attempt: its own
// context, header map (with the key) and body.
func (op *operation) attemptRequest(ctx context.Context, rc io.ReadCloser) *http.Request {
	r := op.req.WithContext(ctx)
	r.Header = cloneHeader(op.req.Header, op.wire)
	op.body.apply(r, rc)
	return r
}

// cloneHeader deep-copies h and, when wire is not empty, sets the key
// header to it, in two allocations (the map and one backing array).
func cloneHeader(h http.Header, wire string) http.Header {
	nv := 0
	for _, vv := range h {
		nv += len(vv)
	}
	extra := 0
	if wire != "" {
		extra = 1
	}
	sv := make([]string, nv+extra)
	h2 := make(http.Header, len(h)+extra)
	for k, vv := range h {
		if vv == nil {
			h2[k] = nil
			continue
		}
		n := copy(sv, vv)
		h2[k] = sv[:n:n]
		sv = sv[n:]
	}
	if wire != "" {
		sv[0] = wire
		h2[HeaderIdempotencyKey] = sv[:1:1]
	}
	return h2
}

// finish records the attempt count and the error, if any, for a Client
// waiting on them.
func (op *operation) finish(n int, err *Error) {
	if s, ok := op.ctx.Value(statsCtxKey{}).(*opStats); ok {
		s.attempts = n
		s.key = op.key
		s.err = err
	}
}

// interrupted ends an operation whose context is done between attempts,
// after n attempts: it closes the body prepared for the next one and keeps
// the last attempt's transport error, if any, next to the context's.
func (op *operation) interrupted(n int, err error, next io.ReadCloser) error {
	if next != nil {
		next.Close()
	}
	if op.lastErr != nil {
		err = fmt.Errorf("%w (last attempt: %w)", err, op.lastErr)
	}
	return op.fail(n, err)
}

// fail builds the error for an operation that ends without a response.
func (op *operation) fail(n int, err error) error {
	op.body.closeUnused()
	cause := ErrNotSent
	if op.sent {
		cause = ErrOutcomeUnknown
	}
	if cerr := op.ctx.Err(); cerr != nil && err != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (last attempt: %w)", cerr, err)
	}
	e := &Error{Cause: cause, Key: op.key, Attempts: n, Status: op.lastStatus, Err: err}
	op.finish(n, e)
	return e
}

// errBadURL marks a request URL that no attempt can cure.
var errBadURL = errors.New("saferetry: invalid request URL")

// checkURL rejects, before anything is sent, a missing URL and an http or
// https URL without a host, which RFC 9110 (section 4.2.1) calls invalid
// and a base would refuse on every attempt. Other schemes are left to the
// base, which may support them.
func checkURL(u *url.URL) error {
	switch {
	case u == nil:
		return fmt.Errorf("%w: request has no URL", errBadURL)
	case u.Host == "" && (u.Scheme == "http" || u.Scheme == "https"):
		return fmt.Errorf("%w: %s URL without a host", errBadURL, u.Scheme)
	}
	return nil
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// opStats carries an operation's results from the Transport to the Client.
type opStats struct {
	attempts int
	key      string
	err      *Error // the operation's error when it got no response
}

type statsCtxKey struct{}
