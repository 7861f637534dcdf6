package idempotency

import (
	"net/http"
	"strings"
)

// Header names of the protocol.
const (
	// HeaderIdempotencyKey carries the client's key for one logical
	// operation.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on answers that come from the store
	// rather than from running the handler.
	HeaderReplayed = "Idempotent-Replayed"
)

// neverReplayed reports whether the canonical header name k must never be
// stored or replayed: it is per-response (Date, rate limits, Retry-After),
// per-client (Set-Cookie), per-connection, or computed on write.
func neverReplayed(k string) bool {
	switch k {
	case "Set-Cookie", "Set-Cookie2", "Date", "Retry-After", "Content-Length",
		"Transfer-Encoding", "Connection", "Keep-Alive", "Trailer", "Upgrade",
		"Proxy-Connection", HeaderReplayed:
		return true
	}
	return strings.HasPrefix(k, "Ratelimit") || strings.HasPrefix(k, "X-Ratelimit")
}

// storedHeaders returns a copy of the allow-listed headers of h, or nil.
func (c *config) storedHeaders(h http.Header) http.Header {
	var out http.Header
	for k, v := range h {
		if !c.replayHeaders[k] || len(v) == 0 {
			continue
		}
		if out == nil {
			out = make(http.Header, 4)
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}
