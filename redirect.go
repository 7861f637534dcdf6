package saferetry

import (
	"net/http"

	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// ErrCrossOriginRedirect is the Err of the [*Error] (Cause [ErrNotSent])
// for a redirect hop to another origin (scheme, host or port) than the
// first request's that would carry the request's body or its key there: a
// 307 or 308 answer to a POST, say. The hop is not sent unless
// [WithCrossOriginRedirects] allows it. net/http drops Authorization and
// cookies when the host changes, but resends the body and every other
// header, and keeps them all across a change of port or scheme; a
// payment's body (a card number, an amount) and its key are the first
// server's business only.
var ErrCrossOriginRedirect = retrypolicy.ErrCrossOriginRedirect

// WithCrossOriginRedirects lets a request's body and key follow a redirect
// to another origin (scheme, host or port; an http to https upgrade is
// one) than the first request's. By default such a hop is not sent when it
// has a body or a keyed method (a POST or PATCH, or any method but GET and
// HEAD with a key): it fails with [ErrCrossOriginRedirect]. Any other hop
// (the GET after a 303) is sent without the key.
func WithCrossOriginRedirects(allow bool) Option {
	return func(c *config) { c.crossOriginRedirects = allow }
}

// redirectHop applies [WithCrossOriginRedirects]'s rule to req, which
// carries key (or none).
func (c *config) redirectHop(req *http.Request, key string) retrypolicy.Hop {
	return retrypolicy.RedirectHop(req, c.crossOriginRedirects, c.keyMethods.Has, key != "")
}
