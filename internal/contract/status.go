package contract

import (
	"net/http"
	"strings"
)

// The client's and the server's status rules are two halves of one rule,
// which is why they are written here side by side. CONTRACT.md, server
// rules: "Outcomes stored: statuses below 500 except 408 and 429. 5xx, 408,
// 429 and a handler panic store nothing and release the claim, so a retry
// runs the handler again." Client rule 3: "Retryable outcomes: ... 408, 409
// that is not a replay (Idempotent-Replayed: true absent), 429, 5xx except
// 501." So:
//
//   - a status the server stores is the operation's answer: replayed, it is
//     final for the client (a replayed 409 is the handler's own 409, not the
//     middleware's "in progress");
//   - a status the server does not store leaves the operation undone, and
//     the client retries it, save 501, which no retry cures;
//   - the one status both retried and storable is 409: the middleware's
//     own "in progress" answer, which is never stored, against a handler's
//     409, which is, and comes back marked as replayed.
//
// TestStatusTablesAgree checks all three for every status from 100 to 599.

// Retried reports whether the client retries an answer with status and
// header h (CONTRACT.md, client rule 3): 408, 409 unless h marks it as
// replayed, 429, and 5xx except 501. h is read only for a 409.
func Retried(status int, h http.Header) bool {
	switch {
	case status == http.StatusConflict:
		return !Replayed(h)
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		return true
	case status >= 500 && status <= 599:
		return status != http.StatusNotImplemented
	}
	return false
}

// Stored reports whether the server stores an outcome with status and
// replays it to a retry (CONTRACT.md, server rules, "Outcomes stored"):
// every status below 500 except 408 and 429.
func Stored(status int) bool {
	return status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// Replayed reports whether h marks an answer as replayed from the server's
// record (Idempotent-Replayed: true, in any case).
func Replayed(h http.Header) bool {
	return strings.EqualFold(h.Get(HeaderReplayed), "true")
}
