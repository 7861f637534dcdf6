package saferetry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// ConfigureRetryableClient gives an existing go-retryablehttp client the
// saferetry rules, in one call:
//
//   - keys: before the first attempt of each logical request, a key from
//     [WithKey] or a generated one (POST and PATCH by default, see
//     [WithKeyMethods]) is put in the request's Idempotency-Key header,
//     where it stays unchanged for all of retryablehttp's retries. A key
//     already in the header wins. Supplied keys are validated and an
//     invalid one fails before sending.
//   - classification: CheckRetry follows the same rules as [Transport]
//     (409 unless replayed, 408, 429 and 5xx except 501 retried; 400, 422
//     and other statuses final; TLS verification and client-side errors
//     such as redirect limits final; an attempt cut by http.Client.Timeout
//     retried like a timeout; unsafe methods without a key never retried),
//     then the [Classifier] if any, then the retry budget, which counts
//     as the Transport's does (see [WithRetryBudget]).
//   - waits: Backoff honours Retry-After on 409, 429 and 503, capped by
//     [WithMaxRetryAfter] and jittered; otherwise it grows exponentially
//     from RetryWaitMin to RetryWaitMax with jitter.
//   - outcome: ErrorHandler returns the last response with a nil error
//     when retries are exhausted, instead of "giving up"; with no response
//     it returns an [*Error] with the key and attempt count, matching
//     [ErrOutcomeUnknown] if any attempt may have reached the server and
//     [ErrNotSent] otherwise.
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
// It sets CheckRetry, Backoff and ErrorHandler, wraps RequestLogHook (the
// previous hook still runs; replacing it afterwards loses the per-request
// state), replaces HTTPClient by a copy whose Transport validates keys and
// records what each attempt did (nil HTTPClient or Transport means
// http.DefaultTransport), and sets RetryMax to n-1 when [WithMaxAttempts]
// is given. Call it after setting those fields yourself and before the
// client is used. [WithHook], [WithLogger], [WithBackoff] and
// [WithAttemptTimeout] do not apply: retryablehttp has its own logger,
// hooks, wait bounds and timeout.
//
// Its Backoff is not given the context, so CheckRetry refuses a retry when
// the longest wait Backoff could choose would end past the context
// deadline, and the last outcome is returned at once. A limit that comes
// from retryablehttp itself: a context canceled during a wait makes it
// return the bare context error, without the key.
func ConfigureRetryableClient(c *retryablehttp.Client, opts ...Option) {
	cfg := newConfig(opts)
	bud := newBudget(cfg.budgetCapacity, cfg.budgetCost)

	hc := new(http.Client)
	if c.HTTPClient != nil {
		*hc = *c.HTTPClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &rhTransport{base: base}
	c.HTTPClient = hc

	if cfg.maxAttemptsSet {
		c.RetryMax = cfg.maxAttempts - 1
	}

	prevHook := c.RequestLogHook
	c.RequestLogHook = func(l retryablehttp.Logger, r *http.Request, retry int) {
		if retry == 0 {
			cfg.attachKey(r)
			// CheckRetry gets the request's context and nothing else of
			// it: the operation's state travels there.
			*r = *r.WithContext(context.WithValue(r.Context(), rhOpCtxKey{}, &rhOp{}))
		}
		if st := rhOpFrom(r.Context()); st != nil {
			st.attempts = retry + 1
		}
		if prevHook != nil {
			prevHook(l, r, retry)
		}
	}

	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		st := rhOpFrom(ctx)
		var (
			req          *http.Request
			retry        bool
			transportErr bool
			ae           *attemptError
		)
		switch {
		case err == nil && resp != nil:
			req = resp.Request
			retry, _ = classifyStatus(resp)
		case errors.As(err, &ae):
			if ae.invalidKey {
				return false, nil // ErrorHandler returns the key's error
			}
			req, transportErr = ae.req, true
			retry, _, _ = classifyError(context.Background(), ae.err)
		case st != nil && st.req != nil && isTimeout(err):
			// net/http replaced the attempt's error by its own when
			// http.Client.Timeout expired: an attempt timeout.
			req, transportErr, retry = st.req, true, true
		default:
			// Not a round trip's error: a redirect limit, a bad URL or a
			// CheckRedirect refusal (which net/http returns with the last
			// response). It is final as it is.
			return false, nil
		}
		var outcome error // the operation's error if this attempt is the last
		if transportErr {
			outcome = st.outcome(err, ae)
		}
		if req == nil && st != nil {
			req = st.req
		}
		if ctx.Err() != nil || req == nil {
			return false, outcome
		}
		retry = cfg.override(req, resp, err, retry)
		if retry && req.Header.Get(HeaderIdempotencyKey) == "" && !retriedWithoutKey(req.Method) {
			retry = false
		}
		if !retry {
			if !transportErr {
				if retryable, _ := classifyStatus(resp); !retryable {
					bud.succeeded(st.spentTokens())
				}
			}
			return false, outcome
		}
		if st != nil && passesDeadline(ctx, time.Now(), cfg.rhLongestWait(c, st.attempts-1, resp)) {
			// Backoff is not given the context: stop here rather than
			// let retryablehttp start a wait the deadline would cut.
			return false, outcome
		}
		cost := bud.retryCost(transportErr)
		if !bud.spend(cost) {
			return false, outcome
		}
		if st != nil {
			st.spent += cost
		}
		// The error is kept by retryablehttp only if RetryMax ends the
		// retries here; it then reaches ErrorHandler as the outcome.
		return true, outcome
	}

	c.Backoff = func(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
		if d, _, ok := retryAfter(resp, time.Now(), cfg.maxRetryAfter, jitter); ok {
			return d
		}
		return exponentialWait(minWait, maxWait, attempt)
	}

	c.ErrorHandler = func(resp *http.Response, err error, attempts int) (*http.Response, error) {
		if err == nil && resp != nil {
			return resp, nil
		}
		if resp != nil {
			// net/http returns the last response along with a redirect
			// policy error; the error is the outcome.
			drain(resp.Body)
		}
		// CheckRetry made the outcome of an attempt without a response an
		// *Error; an invalid key comes as one from rhTransport.
		var e *Error
		if !errors.As(err, &e) {
			return nil, err
		}
		if e.Cause != ErrInvalidKey {
			e.Attempts = attempts
		}
		return nil, e
	}
}

// rhOp is the state of one logical request through a retryablehttp client,
// kept in its context from the first attempt on. Attempts of one request
// run one after the other, so it needs no lock.
type rhOp struct {
	req      *http.Request // the last attempt's request, as sent
	key      string
	attempts int
	sent     bool  // some attempt may have reached the server
	spent    int64 // budget tokens spent by this request's retries
}

type rhOpCtxKey struct{}

func rhOpFrom(ctx context.Context) *rhOp {
	st, _ := ctx.Value(rhOpCtxKey{}).(*rhOp)
	return st
}

func (st *rhOp) spentTokens() int64 {
	if st == nil {
		return 0
	}
	return st.spent
}

// outcome is the error of a request whose last attempt, which failed with
// err, ends it: [ErrOutcomeUnknown] if any attempt may have reached the
// server, else [ErrNotSent]. ae, when not nil, is the attempt's own error.
func (st *rhOp) outcome(err error, ae *attemptError) *Error {
	e := &Error{Cause: ErrOutcomeUnknown, Err: err}
	if st == nil {
		// Without the hook's state (RequestLogHook replaced), only this
		// attempt is known.
		if ae != nil {
			e.Key = ae.key
			if !ae.sent {
				e.Cause = ErrNotSent
			}
		}
		return e
	}
	e.Key, e.Attempts = st.key, st.attempts
	if !st.sent {
		e.Cause = ErrNotSent
	}
	return e
}

// isTimeout reports a net/http timeout error.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// attachKey puts the operation's key in r's header before its first
// attempt, on a copy of the header map so that no map shared with the
// caller is written.
func (c *config) attachKey(r *http.Request) {
	if r.Header.Get(HeaderIdempotencyKey) != "" {
		return
	}
	var wire string
	if k, ok := KeyFromContext(r.Context()); ok {
		// Validated by rhTransport before sending.
		wire = FormatKey(k, c.structuredKey)
	} else if c.keyMethod(r.Method) {
		k, err := NewKey()
		if err != nil {
			return // no key: the request is sent once and not retried
		}
		wire = FormatKey(k, c.structuredKey)
	} else {
		return
	}
	h := r.Header.Clone()
	if h == nil {
		h = make(http.Header, 1)
	}
	h[HeaderIdempotencyKey] = []string{wire}
	r.Header = h
}

// rhLongestWait bounds the wait c's Backoff can choose after the attempt
// numbered attempt (from 0) that got resp: the capped Retry-After plus its
// largest jitter, or the top of the exponential range.
func (cfg *config) rhLongestWait(c *retryablehttp.Client, attempt int, resp *http.Response) time.Duration {
	noJitter := func(int64) int64 { return 0 }
	if d, _, ok := retryAfter(resp, time.Now(), cfg.maxRetryAfter, noJitter); ok {
		return min(d+d/10, cfg.maxRetryAfter)
	}
	return exponentialCap(c.RetryWaitMin, c.RetryWaitMax, attempt)
}

// exponentialCap is minWait·2^attempt capped at maxWait.
func exponentialCap(minWait, maxWait time.Duration, attempt int) time.Duration {
	d := minWait
	for i := 0; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}

// exponentialWait is [exponentialCap] with "equal jitter": a uniform draw
// from its upper half.
func exponentialWait(minWait, maxWait time.Duration, attempt int) time.Duration {
	d := exponentialCap(minWait, maxWait, attempt)
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + time.Duration(jitter(int64(d-half)+1))
}

// rhTransport sits under a retryablehttp client's http.Client. It validates
// the key before anything is sent and annotates attempt errors with what
// CheckRetry and ErrorHandler need, since they are not given the request.
type rhTransport struct {
	base http.RoundTripper
}

func (t *rhTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st := rhOpFrom(r.Context())
	key, _, err := headerKey(r.Header)
	if err != nil {
		closeRequestBody(r)
		return nil, &attemptError{req: r, err: err, invalidKey: true}
	}
	if st != nil {
		st.req, st.key = r, key
	}
	if err := checkURL(r.URL); err != nil {
		closeRequestBody(r)
		return nil, &attemptError{req: r, key: key, err: err}
	}
	if err := r.Context().Err(); err != nil {
		// Nothing is sent with a done context.
		closeRequestBody(r)
		return nil, &attemptError{req: r, key: key, err: err}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		if resp != nil {
			drain(resp.Body)
		}
		sent := !dialError(err) && !permanentError(err)
		if st != nil {
			st.sent = st.sent || sent
		}
		return nil, &attemptError{req: r, key: key, err: err, sent: sent}
	}
	if st != nil {
		st.sent = true
	}
	return resp, nil
}

// CloseIdleConnections forwards to the base, as retryablehttp calls it.
func (t *rhTransport) CloseIdleConnections() { closeIdle(t.base) }

// attemptError is an attempt's transport error with the request it failed.
type attemptError struct {
	req        *http.Request
	key        string
	err        error
	sent       bool
	invalidKey bool
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }
