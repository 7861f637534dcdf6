package saferetry

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// ErrCrossOriginRedirect is the Err of the [*Error] (Cause [ErrNotSent])
// for a redirect that would carry a request's body, and with it its
// Idempotency-Key, to another origin than the one the caller asked for: a
// 307 or 308 answer to a POST, say. The redirect is not followed unless
// [WithCrossOriginRedirects] allows it. net/http strips Authorization on
// such a hop, but resends the body and the other headers; a payment's body
// (a card number, an amount) and its key are the server's business only.
var ErrCrossOriginRedirect = errors.New("saferetry: not following a redirect that would carry the request's body and Idempotency-Key to another origin")

// WithCrossOriginRedirects lets the key and the body of a request follow a
// redirect to another origin (scheme, host and port) than the first
// request's. By default a redirected request to another origin is sent
// without an Idempotency-Key when it has no body (a 303 turned it into a
// GET, say), and not sent at all when it has one (a 307 or 308): it fails
// with [ErrCrossOriginRedirect].
func WithCrossOriginRedirects(allow bool) Option {
	return func(c *config) { c.crossOriginRedirects = allow }
}

// leavesOrigin reports whether req is a redirect (net/http sets
// req.Response on each hop it follows) to another origin than the first
// request of its chain.
func leavesOrigin(req *http.Request) bool {
	if req.Response == nil {
		return false
	}
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	return origin(first.URL) != origin(req.URL)
}

// origin is u's scheme, host and port, with the scheme's default port made
// explicit and case folded.
func origin(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + host + ":" + port
}

// hasBody reports whether req sends a body.
func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

// crossOrigin applies the rule of [WithCrossOriginRedirects] to req: it
// returns the request to send, without its key when it has no body, or
// ErrCrossOriginRedirect when it has one. A request that stays in its
// origin, or any request when cross-origin redirects are allowed, is
// returned as it is.
func (c *config) crossOrigin(req *http.Request) (*http.Request, bool, error) {
	if c.crossOriginRedirects || !leavesOrigin(req) {
		return req, false, nil
	}
	if hasBody(req) {
		return req, false, ErrCrossOriginRedirect
	}
	if len(req.Header.Values(HeaderIdempotencyKey)) > 0 {
		req = req.Clone(req.Context())
		req.Header.Del(HeaderIdempotencyKey)
	}
	return req, true, nil
}
