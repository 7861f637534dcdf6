package saferetryablehttp

import (
	"net/http"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// rhTransport sits under a retryablehttp client's http.Client. It validates
// the key before anything is sent and annotates attempt errors with what
// CheckRetry and ErrorHandler need, since they are not given the request.
type rhTransport struct {
	base http.RoundTripper
	a    *adapter
}

var _ http.RoundTripper = (*rhTransport)(nil)

func (t *rhTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st := rhOpFrom(r.Context())
	key, err := headerKey(r, st)
	switch {
	case err != nil && (st == nil || st.state.Attempt <= 1):
		retrypolicy.CloseBody(r)
		return nil, &attemptError{req: r, err: err, invalidKey: true}
	case st != nil && (err != nil || r.Response == nil && !st.keepsKey(key)):
		// A retry's key made invalid by a hook is not the first
		// attempt's either: the request ends with its earlier
		// attempts' outcome, not with an invalid key's, which says that
		// nothing was sent; its key is the request's, which the
		// outcome names (the attempt before may have ended on a hop
		// sent without it).
		retrypolicy.CloseBody(r)
		st.key = st.opKey
		return nil, &attemptError{req: r, key: st.opKey, err: errKeyChanged}
	}
	if r.Response != nil {
		switch retrypolicy.RedirectHop(r, t.a.cfg.crossOrigin, t.a.cfg.keyMethods.Has, key != "") {
		case retrypolicy.HopRefuse:
			retrypolicy.CloseBody(r)
			return nil, &attemptError{req: r, key: key, err: saferetry.ErrCrossOriginRedirect}
		case retrypolicy.HopSendWithoutKey:
			r, key = retrypolicy.WithoutKey(r), ""
		}
	}
	if st != nil {
		st.req, st.key = r, key
	}
	if err := retrypolicy.CheckURL(r.URL); err != nil {
		retrypolicy.CloseBody(r)
		return nil, &attemptError{req: r, key: key, err: err}
	}
	if err := retrypolicy.ContextErr(r.Context()); err != nil {
		// Nothing is sent with a done context.
		retrypolicy.CloseBody(r)
		return nil, &attemptError{req: r, key: key, err: err}
	}
	// net/http retries a request with an Idempotency-Key on a new
	// connection by itself when a reused one fails, so an attempt that
	// wrote the request may end in a dial error of that second
	// connection, and an attempt that got no connection may end in an
	// error that does not say so (the context's, a proxy's refusal of the
	// CONNECT): written tells (see retrypolicy.Written).
	written := new(retrypolicy.Written)
	r = r.WithContext(written.Trace(r.Context()))
	if st != nil {
		st.written = written
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		if resp != nil {
			retrypolicy.Drain(resp.Body)
		}
		err = retrypolicy.MarkRefused(r, err, written.Load())
		sent := retrypolicy.Sent(err, false, written.Load(), written.NoConn())
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
func (t *rhTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// headerKey decodes the key in r's header ("" when it has none), or
// returns the error of an invalid one, matching [saferetry.ErrInvalidKey].
func headerKey(r *http.Request, st *rhOp) (string, error) {
	if st != nil && st.keyErr != nil {
		return "", st.keyErr
	}
	vals, err := contract.KeyHeaderValues(r.Header)
	if err != nil {
		return "", &saferetry.Error{Cause: saferetry.ErrInvalidKey, Err: err}
	}
	k, err := contract.ParseKeyFields(vals)
	switch {
	case err == contract.ErrNoKey:
		return "", nil
	case err != nil:
		e := &saferetry.Error{Cause: saferetry.ErrInvalidKey, Err: err}
		if len(vals) == 1 {
			e.Key = vals[0]
		}
		return "", e
	}
	return k, nil
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
