package idempotency

import (
	"net/http"
	"net/url"
	"strings"
)

// appendRequestTarget appends to the hashed stream f the request target the
// client sent (r.RequestURI) when a handler in front of the Middleware
// changed the path or query of r.URL from it, as http.StripPrefix does:
// tag 'r' and its escaped path and canonical query (see canonicalQuery),
// or tag 's' and the target as it is when it does not parse. The fingerprint takes r.URL, what the
// handler reads, and this too, so that two routes the rewrite made alike
// (/v1/pay and /v2/pay, both /pay behind their prefixes) are not one. A
// request whose URL is the target it came with, and one not received by a
// server (no RequestURI), append nothing and keep their v1 fingerprints.
func appendRequestTarget(f []byte, r *http.Request, path string) []byte {
	rt := r.RequestURI
	if rt == "" {
		return f
	}
	if p, q, _ := strings.Cut(rt, "?"); p == path && q == r.URL.RawQuery {
		return f // the common case: nothing to parse
	}
	u, err := url.ParseRequestURI(rt)
	if err != nil {
		return appendField(f, 's', rt)
	}
	p, q := u.EscapedPath(), canonicalQuery(u.RawQuery)
	if p == path && q == canonicalQuery(r.URL.RawQuery) {
		return f
	}
	return appendField(f, 'r', p+"?"+q)
}
