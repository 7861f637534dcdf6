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
//     already in the header wins, so doing the same *retryablehttp.Request
//     again repeats the same operation; build a new request for a new one.
//     Supplied keys are validated and an invalid one fails before sending.
//   - classification: CheckRetry follows the same rules as [Transport]
//     (409 unless replayed, 408, 429 and 5xx except 501 retried; 400, 422
//     and other statuses final; TLS verification and client-side errors
//     such as redirect limits final; unsafe methods without a key never
//     retried), then the [Classifier] if any, then the retry budget.
//   - waits: Backoff honours Retry-After on 409, 429 and 503, capped by
//     [WithMaxRetryAfter] and jittered; otherwise it grows exponentially
//     from RetryWaitMin to RetryWaitMax with jitter.
//   - outcome: ErrorHandler returns the last response with a nil error
//     when retries are exhausted, instead of "giving up"; with no response
//     it returns an [*Error] matching [ErrOutcomeUnknown] or [ErrNotSent].
//
// It sets CheckRetry, Backoff and ErrorHandler, wraps RequestLogHook (the
// previous hook still runs), replaces HTTPClient by a copy whose Transport
// reports the method and key of failed attempts (nil HTTPClient or
// Transport means http.DefaultTransport), and sets RetryMax to n-1 when
// [WithMaxAttempts] is given. Call it after setting those fields yourself
// and before the client is used. [WithHook], [WithLogger], [WithBackoff]
// and [WithAttemptTimeout] do not apply: retryablehttp has its own logger,
// hooks, wait bounds and timeout. The retry budget is approximated: every
// answer that is not retried returns 1 token.
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
		}
		if prevHook != nil {
			prevHook(l, r, retry)
		}
	}

	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, nil
		}
		var (
			retry, transportErr bool
			healthy             bool // an answer the budget counts as success
			method, key         string
			req                 *http.Request
		)
		if err == nil && resp != nil {
			retry, _ = classifyStatus(resp)
			healthy = !retry
			if req = resp.Request; req != nil {
				method = req.Method
				key = req.Header.Get(HeaderIdempotencyKey)
			}
		} else {
			var ae *attemptError
			if !errors.As(err, &ae) {
				// The error did not come from a round trip: a redirect
				// limit, a bad URL or a CheckRedirect refusal (which
				// net/http returns with the last response).
				return false, nil
			}
			if ae.invalidKey {
				return false, nil
			}
			req, method, key, transportErr = ae.req, ae.req.Method, ae.key, true
			retry, _, _ = classifyError(context.Background(), ae.err)
		}
		if cfg.classifier != nil {
			switch cfg.classifier(req, resp, err) {
			case DecisionRetry:
				retry = true
			case DecisionReturn:
				retry = false
			}
		}
		if retry && key == "" && !retriedWithoutKey(method) {
			retry = false
		}
		if !retry {
			if healthy {
				bud.succeeded(0)
			}
			return false, nil
		}
		return bud.spend(bud.retryCost(transportErr)), nil
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
		var ae *attemptError
		if !errors.As(err, &ae) {
			return nil, err
		}
		if ae.invalidKey {
			return nil, ae.err
		}
		cause := ErrOutcomeUnknown
		if attempts == 1 && !ae.sent {
			cause = ErrNotSent
		}
		return nil, &Error{Cause: cause, Key: ae.key, Attempts: attempts, Err: err}
	}
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

// exponentialWait is minWait·2^attempt capped at maxWait, with "equal
// jitter": a uniform draw from its upper half.
func exponentialWait(minWait, maxWait time.Duration, attempt int) time.Duration {
	d := minWait
	for i := 0; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	if d > maxWait {
		d = maxWait
	}
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
	var key string
	if vals := r.Header.Values(HeaderIdempotencyKey); len(vals) > 0 {
		var err error
		if len(vals) > 1 {
			err = &Error{Cause: ErrInvalidKey, Err: errorString("request carries several Idempotency-Key values")}
		} else {
			key, err = ParseKey(vals[0])
		}
		if err != nil {
			closeRequestBody(r)
			return nil, &attemptError{req: r, err: err, invalidKey: true}
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		if resp != nil {
			drain(resp.Body)
		}
		return nil, &attemptError{req: r, key: key, err: err, sent: !dialError(err) && !permanentError(err)}
	}
	return resp, nil
}

// CloseIdleConnections forwards to the base, as retryablehttp calls it.
func (t *rhTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

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
