package retrypolicy

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/saferetry/saferetry/internal/contract"
)

// ErrCrossOriginRedirect is the error of a redirect hop that is not sent
// because it would carry a request's body or its Idempotency-Key to
// another origin than the first request's (see [RedirectHop]). It is
// permanent: another attempt would be redirected the same way.
var ErrCrossOriginRedirect = errors.New("saferetry: not following a redirect that would carry the request's body or Idempotency-Key to another origin")

// Hop is what [RedirectHop] says to do with a request.
type Hop uint8

// Hops.
const (
	HopSend           Hop = iota // send it as it is
	HopSendWithoutKey            // send it without an Idempotency-Key
	HopRefuse                    // do not send it: ErrCrossOriginRedirect
)

// RedirectHop applies the redirect rule to req, a request net/http may have
// made to follow a redirect (it sets req.Response on each hop). Within the
// first request's origin (scheme, host and port), or when allow is set,
// it is sent as it is. To another origin a hop that sends a body or whose
// method is keyed (a method the client keys, or any method but GET and
// HEAD that carries a key) is refused: an operation keyed at home must not
// run elsewhere, with its key or without it. Any other hop (a GET after a
// 303, say) goes without the key. keyMethod reports the methods the client
// keys; hasKey whether req carries a key, in its header or its context.
func RedirectHop(req *http.Request, allow bool, keyMethod func(string) bool, hasKey bool) Hop {
	if allow || !leavesOrigin(req) {
		return HopSend
	}
	safe := req.Method == "" || req.Method == http.MethodGet || req.Method == http.MethodHead
	if HasBody(req) || keyMethod(req.Method) || (hasKey && !safe) {
		return HopRefuse
	}
	return HopSendWithoutKey
}

// WithoutKey returns req without an Idempotency-Key header field: req
// itself when it has none, else a clone (the caller's header map is not
// written).
func WithoutKey(req *http.Request) *http.Request {
	if len(req.Header.Values(contract.HeaderKey)) == 0 {
		return req
	}
	req = req.Clone(req.Context())
	req.Header.Del(contract.HeaderKey)
	return req
}

// leavesOrigin reports whether req is a redirect hop to another origin
// than the first request of its chain.
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
