package idempotency

import (
	"net/http"

	"github.com/saferetry/saferetry/internal/contract"
)

// Problem type URIs: the "type" member of the RFC 9457 problem details the
// Middleware answers with. They are stable: clients may match on them. Each
// resolves to the documentation of its constant. Besides type, title, status
// and detail, a problem about a request whose key was parsed carries the key
// in an "idempotency_key" member.
const (
	// ProblemMissingKey (400): the method is protected, WithKeyRequired is
	// on, and the request has no Idempotency-Key. Add a key and send again.
	ProblemMissingKey = problemBase + "ProblemMissingKey"
	// ProblemMalformedKey (400): the Idempotency-Key is empty, longer than
	// 255 bytes, not printable ASCII, given several times, or a broken
	// sf-string. The detail member says which.
	ProblemMalformedKey = problemBase + "ProblemMalformedKey"
	// ProblemKeyReused (422): the key was already used for a request with a
	// different fingerprint (method, path, query, media type or body).
	// Never retry with this key; use a new key for a new operation.
	ProblemKeyReused = problemBase + "ProblemKeyReused"
	// ProblemInProgress (409): an earlier request with this key is still
	// running. Retry after the Retry-After delay with the same key and body.
	ProblemInProgress = problemBase + "ProblemInProgress"
	// ProblemStoreUnavailable (503): the idempotency store could not be
	// reached, so the request was not run (fail closed). Retry after the
	// Retry-After delay with the same key.
	ProblemStoreUnavailable = problemBase + "ProblemStoreUnavailable"
	// ProblemCommitFailed (503): in transactional mode the handler ran but
	// its transaction was not committed (it was rolled back), or its COMMIT
	// got no answer, so whether it was kept is not known. Retry with the
	// same key: a committed operation is replayed, one rolled back runs
	// again. When part of it was committed some other way and the store
	// recorded it as not replayable, the detail member says so, and the
	// retry gets ProblemResponseTooLarge (410).
	ProblemCommitFailed = problemBase + "ProblemCommitFailed"
	// ProblemRequestTooLarge (413): the request body is over the limit set
	// with WithMaxRequestBody. Nothing was run.
	ProblemRequestTooLarge = problemBase + "ProblemRequestTooLarge"
	// ProblemBodyUnreadable (400): the request body could not be read.
	// Nothing was run.
	ProblemBodyUnreadable = problemBase + "ProblemBodyUnreadable"
	// ProblemRequestTimeout (408): the request body was still arriving when
	// the server stopped waiting for it (its read deadline, such as
	// http.Server.ReadTimeout, passed). Nothing was run. Retry with the same
	// key and body.
	ProblemRequestTimeout = problemBase + "ProblemRequestTimeout"
	// ProblemResponseTooLarge (410): the operation with this key completed,
	// but its response is not replayable: it was too large (over the
	// storage cap, WithMaxResponseBody, or for the store), or it was not
	// sent whole (a body shorter than its Content-Length). It will not run
	// again. The name is kept from when size was the only cause, since
	// clients match on the type URI. The "original_status" member carries
	// the status it completed with. The answer carries Idempotent-Replayed:
	// true.
	ProblemResponseTooLarge = problemBase + "ProblemResponseTooLarge"
	// ProblemScopeUnavailable (500): the scope function set with WithScope
	// returned an error, so the key's owner is unknown and the request was
	// not run (fail closed).
	ProblemScopeUnavailable = problemBase + "ProblemScopeUnavailable"
)

// problemBase prefixes every problem type URI: each resolves to the
// documentation of its constant.
const problemBase = "https://pkg.go.dev/github.com/saferetry/saferetry/idempotency#"

// ContentTypeProblem is "application/problem+json", the media type of the
// Middleware's error answers.
const ContentTypeProblem = contract.ContentTypeProblem

// problem is the document of one of the Middleware's problem answers.
type problem struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail,omitempty"`
	Key            string `json:"idempotency_key,omitempty"`
	OriginalStatus int    `json:"original_status,omitempty"`
}

var problemTitles = map[string]string{
	ProblemMissingKey:       "Idempotency-Key is required",
	ProblemMalformedKey:     "Idempotency-Key is malformed",
	ProblemKeyReused:        "Idempotency-Key was used for a different request",
	ProblemInProgress:       "A request with this Idempotency-Key is in progress",
	ProblemStoreUnavailable: "Idempotency store unavailable",
	ProblemCommitFailed:     "The operation could not be committed",
	ProblemRequestTooLarge:  "Request body too large",
	ProblemBodyUnreadable:   "Request body could not be read",
	ProblemRequestTimeout:   "Request body did not arrive in time",
	ProblemResponseTooLarge: "The operation completed, but its response cannot be replayed",
	ProblemScopeUnavailable: "Idempotency scope unavailable",
}

// writeProblem answers with an RFC 9457 problem, titled after its type
// unless p has a title. retryAfter > 0 adds a Retry-After header in whole
// seconds. The answer is never cached (see [contract.WriteProblem]).
func writeProblem(w http.ResponseWriter, p problem, retryAfter int) {
	if p.Title == "" {
		p.Title = problemTitles[p.Type]
	}
	contract.WriteProblem(w, p.Status, p, retryAfter)
}
