package contract

import (
	"net/http"
	"slices"
	"strings"
)

// The client's and the server's status rules are two halves of one rule,
// which is why they are written here side by side. CONTRACT.md, server
// rules: "Outcomes stored: statuses below 500 except 408 and 429. 5xx, 408,
// 429 and a handler panic store nothing and release the claim, so a retry
// runs the handler again" (and 307 and 308, see NotStored). Client rule 3:
// "Retryable outcomes: ... 408, 409 that is not a replay
// (Idempotent-Replayed: true absent), 429, 5xx except 501." So:
//
//   - a status the server stores is the operation's answer: replayed, it is
//     final for the client (a replayed 409 is the handler's own 409, not the
//     middleware's "in progress");
//   - a status the server does not store leaves the operation undone, and
//     the client retries it, save 501, which no retry cures, and 307 and
//     308, which it follows to the URI they name;
//   - the one status both retried and storable is 409: the middleware's
//     own "in progress" answer, which is never stored, against a handler's
//     409, which is, and comes back marked as replayed.
//
// TestStatusTablesAgree checks all three for every status from 100 to 599.

// Retried reports whether the client retries an answer with status and
// header h (CONTRACT.md, client rule 3): 408, 409, 429, and 5xx except
// 501, unless h marks the answer as replayed. A replay is the operation's
// recorded outcome, the same on every retry, so it is final whatever its
// status: a 409 replayed is the handler's own, and a 5xx replayed (from a
// server that stores 5xx) comes back as it is however often it is asked
// for. A 400 or a 422 is final always (see [FinalAlways]). A server's
// explicit say (Stripe-Should-Retry, see [ShouldRetry]) comes next, then
// the status.
func Retried(status int, h http.Header) bool {
	if Replayed(h) || FinalAlways(status) {
		return false
	}
	if retry, said := ShouldRetry(h); said {
		return retry
	}
	return RetriedStatus(status)
}

// FinalAlways reports whether status is final whatever the server says
// (CONTRACT.md, client rule 3): a 400 (the request is malformed) and a 422
// (its key was used with another payload) come back the same to the same
// key and body, so not even Stripe-Should-Retry: true makes them retried.
func FinalAlways(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusUnprocessableEntity
}

// RetriedStatus is the status half of [Retried]: 408, 409, 429, and 5xx
// except 501, for an answer that is neither a replay nor marked by the
// server.
func RetriedStatus(status int) bool {
	switch {
	case status == http.StatusConflict, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		return true
	case status >= 500 && status <= 599:
		return status != http.StatusNotImplemented
	}
	return false
}

// Stored reports whether the server stores an outcome with status and
// replays it to a retry (CONTRACT.md, server rules, "Outcomes stored"):
// every status below 500 except those of [NotStored].
func Stored(status int) bool {
	return status < 500 && !slices.Contains(notStored[:], status)
}

// notStored: see NotStored.
var notStored = [...]int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusRequestTimeout, http.StatusTooManyRequests}

// NotStored returns the statuses below 500 that the server does not store,
// in increasing order: 408 and 429, as CONTRACT.md has it, and 307 and
// 308. A 307 or 308 says that the request is to be repeated, method, body
// and all, at another URI: nothing was done here, and the client carries
// the key to the new URI (CONTRACT.md, client rule: a same-origin 307/308
// carries the key and body). Stored under the key with the first URI's
// fingerprint, it made the request at the new URI a reuse of the key with
// another payload (422), so that a redirected operation could never run;
// not stored, the claim is released and the new URI's request claims the
// key.
func NotStored() []int { return slices.Clone(notStored[:]) }

// HeaderShouldRetry is "Stripe-Should-Retry", the header with which a
// server tells whether a request is worth retrying ("true" or "false"),
// overriding what the status alone says: Stripe's API sends it, for
// instance "true" on a 409 from a lock it held briefly, "false" where a
// retry could not help.
const HeaderShouldRetry = "Stripe-Should-Retry"

// ShouldRetry reports what h's Stripe-Should-Retry says, in any case; said
// is false when it is absent or neither "true" nor "false".
func ShouldRetry(h http.Header) (retry, said bool) {
	switch v := First(h, HeaderShouldRetry); {
	case strings.EqualFold(v, "true"):
		return true, true
	case strings.EqualFold(v, "false"):
		return false, true
	}
	return false, false
}

// Replayed reports whether h marks an answer as replayed from the server's
// record (Idempotent-Replayed: true, in any case).
func Replayed(h http.Header) bool {
	return strings.EqualFold(First(h, HeaderReplayed), "true")
}

// First is h.Get(key) for a key already in canonical form, as every header
// name constant of this package is: it indexes the map directly instead of
// canonicalising key on every call, which the client does several times
// per attempt. net/http stores the headers it parses and those set with
// Set or Add under their canonical names, so the two agree.
func First(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
