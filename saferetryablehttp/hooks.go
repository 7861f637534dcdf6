package saferetryablehttp

import (
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

// wrapHooks puts the adapter around the client's RequestLogHook, and its
// ResponseLogHook and PrepareRetry if set: retryablehttp runs them
// between one attempt and the next, where only they tell the adapter
// that the retry CheckRetry allowed, and paid, is made or is not, and
// that the answer in hand is let go of. A hook's panic goes on to the
// caller as it was, as the Transport sends on its hooks' (a caller that
// recovers, as net/http's server does for a handler, must not be left
// with the answer's connection held, nor the client's other requests
// with a budget paid for a retry never made).
func (a *adapter) wrapHooks() {
	c := a.c
	prevReq := c.RequestLogHook
	c.RequestLogHook = func(l retryablehttp.Logger, r *http.Request, retry int) {
		st := a.beforeAttempt(r, retry)
		if prevReq != nil {
			guard(st, nil, func() { prevReq(l, r, retry) })
		}
		if st != nil {
			st.retried()
		}
	}
	if prev := c.ResponseLogHook; prev != nil {
		c.ResponseLogHook = func(l retryablehttp.Logger, resp *http.Response) {
			guard(respOp(resp), resp, func() { prev(l, resp) })
		}
	}
	if prev := c.PrepareRetry; prev != nil {
		c.PrepareRetry = func(r *http.Request) (err error) {
			// Do ends without the retry when PrepareRetry fails;
			// ErrorHandler, which the failure reaches, may not find the
			// request (its last attempt got no answer).
			st := rhOpFrom(r.Context())
			guard(st, nil, func() { err = prev(r) })
			if err != nil {
				st.forgoRetry()
			}
			return err
		}
	}
}

// guard runs the caller's code f (a hook, PrepareRetry, the classifier)
// for the request whose state is st (nil: unknown, or none to refund).
// Should f panic, the panic goes on as it was, once resp's body, if resp
// is not nil, is closed and the retry pending for st, never to be made,
// has given its cost back.
func guard(st *rhOp, resp *http.Response, f func()) {
	done := false
	defer func() {
		if done {
			return
		}
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		st.forgoRetry()
	}()
	f()
	done = true
}

// respOp is the retry state of the request that got resp, or nil.
func respOp(resp *http.Response) *rhOp {
	if resp == nil || resp.Request == nil {
		return nil
	}
	return rhOpFrom(resp.Request.Context())
}
