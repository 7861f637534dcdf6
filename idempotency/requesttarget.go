package idempotency

import (
	"net/http"
	"net/url"
	"strings"
)

// appendRequestTarget appends to the hashed stream f the path the client
// sent (that of r.RequestURI) when a handler in front of the Middleware
// changed r.URL's path from it, as http.StripPrefix does: tag 'r' and its
// escaped path, or tag 's' and the target as it is when it does not parse.
// The fingerprint takes r.URL, what the handler reads, and this too, so that
// two routes the rewrite made alike (/v1/pay and /v2/pay, both /pay behind
// their prefixes) are not one. Both paths are compared, and the client's
// taken, with their escapes' hex digits in upper case (see upperEscapes).
//
// The query the client sent is not taken: the handler reads r.URL's, which
// the fingerprint has, and what a handler in front removed from it (a
// signature and its timestamp, checked and dropped) may change on every
// attempt of one request. A request whose path is the one it came with, and
// one not received by a server (no RequestURI), append nothing and keep
// their v1 fingerprints.
func appendRequestTarget(f []byte, r *http.Request, path string) []byte {
	rt := r.RequestURI
	if rt == "" {
		return f
	}
	if p, _, _ := strings.Cut(rt, "?"); p == path {
		return f // the common case: nothing to parse
	}
	u, err := url.ParseRequestURI(rt)
	if err != nil {
		return appendField(f, 's', rt)
	}
	if p := upperEscapes(u.EscapedPath()); p != upperEscapes(path) {
		return appendField(f, 'r', p)
	}
	return f
}
