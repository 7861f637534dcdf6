package mockserver

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/saferetry/saferetry/internal/contract"
)

// problemBase prefixes every problem type URI of the mock server: each
// resolves to the documentation of its constant.
const problemBase = "https://pkg.go.dev/github.com/saferetry/saferetry/mockserver#"

// Problem type URIs of the answers to a payment that ran into a problem of
// its own. These and the two groups below are the problems the mock server
// writes itself; the idempotency middleware's problems (missing key, key
// reused, in progress, ...) carry the idempotency package's type URIs.
const (
	// ProblemValidation is the type of a 400 answer to a payment request
	// whose body is not a valid payment: not JSON, not UTF-8, an amount
	// that is not a positive integer, a currency that is not three
	// letters, an empty recipient or one that contains U+0000 (which no
	// ledger could store in PostgreSQL), a member given more than once.
	// Its "errors" member lists the offending fields. The status is 400,
	// not 422, because 422 is what the idempotency contract answers for a
	// key reused with a different payload.
	ProblemValidation = problemBase + "ProblemValidation"
	// ProblemInsufficientFunds is the type of a 402 answer to a payment whose
	// amount exceeds the balance of its currency. Like any answer below 500 it
	// is stored and replayed for the same key.
	ProblemInsufficientFunds = problemBase + "ProblemInsufficientFunds"
	// ProblemLedgerUnavailable is the type of a 503 answer when the ledger
	// (a shared one in Redis or PostgreSQL) could not be read or written:
	// nothing was paid, or the ledger's answer was lost after its write; a
	// retry with the same key runs the payment, which finds a payment made
	// under the key's DerivedKey and pays nothing twice (keyed payments).
	ProblemLedgerUnavailable = problemBase + "ProblemLedgerUnavailable"
	// ProblemUnsupportedMediaType is the type of a 415 answer to a payment
	// whose Content-Type is not JSON in UTF-8: not application/json nor an
	// application/*+json type, or with a charset other than utf-8 (its
	// Accept header names application/json), or to one whose body has a
	// content coding, such as gzip (its Accept-Encoding header names
	// identity). It is answered before the
	// Idempotency-Key is claimed, so, unlike the other answers below 500,
	// it is neither stored nor replayed: the same key may be sent again
	// with the body declared as JSON. It is answered only to a request
	// with a valid key of which the store holds no record: a missing or
	// malformed key gets the idempotency Middleware's 400, a retry of a
	// key that executed or is running is answered from its record by the
	// Middleware, as any retry (replayed, 422, 409
	// idempotency.ProblemInProgress with Retry-After, or under
	// idempotency.WithWaitForResult the answer waited for), without ever
	// taking its claim over, so a 415 says that this key paid
	// nothing (but for a store that could not be reached under
	// idempotency.WithFailOpen, whose 415 says that the key was not
	// looked up).
	ProblemUnsupportedMediaType = problemBase + "ProblemUnsupportedMediaType"
	// ProblemKeyChanged is the type of a 503 answer, with Retry-After, to
	// a payment that would be answered 415 (ProblemUnsupportedMediaType)
	// but whose Idempotency-Key the store held (or could not be looked
	// up), and so was passed to the idempotency Middleware to be answered
	// from the key's record, when that record went away in between (it
	// expired, or the request that held it failed and released it, also
	// while this one waited for it under idempotency.WithWaitForResult),
	// or, when the key could not be looked up at first, the store holds
	// none (there may never have been one; the detail says which):
	// nothing was paid or stored, and a retry with the same key is
	// answered 415, or from the key's record if it has one by then.
	ProblemKeyChanged = problemBase + "ProblemKeyChanged"
)

// Problem type URIs of the answers to injected faults ([Server.FailNext],
// [Server.DelayNext]).
const (
	// ProblemInjectedFailure is the type of an answer produced by FailNext:
	// the request was refused before anything ran.
	ProblemInjectedFailure = problemBase + "ProblemInjectedFailure"
	// ProblemAborted is the type of a 503 answer to a payment whose client
	// went away while an injected delay was running: the payment did not run
	// and nothing was stored for its key.
	ProblemAborted = problemBase + "ProblemAborted"
)

// Problem type URIs of the answers about a route (an unknown path, a method
// it does not allow) and of a bad admin request.
const (
	// ProblemNotFound is the type of a 404 answer of the payments or admin
	// API: an unknown path, a payment that does not exist, or any path under
	// AdminPrefix when the admin API is off (WithAdminAPI).
	ProblemNotFound = problemBase + "ProblemNotFound"
	// ProblemMethodNotAllowed is the type of a 405 answer to a method that
	// the path does not allow (POST /_mock/latency, DELETE /payments). Its
	// Allow header lists the methods that the path allows.
	ProblemMethodNotAllowed = problemBase + "ProblemMethodNotAllowed"
	// ProblemBadAdminRequest is the type of a 400 answer of the admin API.
	ProblemBadAdminRequest = problemBase + "ProblemBadAdminRequest"
)

// FieldError names one invalid field of a payment request, in the "errors"
// member of a ProblemValidation answer. It is a plain value of two
// strings, safe to copy and to read from several goroutines at once.
type FieldError struct {
	// Field is the JSON member at fault ("amount", "currency",
	// "recipient", one of them named in another case, as "Amount", or
	// another member given more than once); "" means the body as a
	// whole.
	Field string `json:"field"`
	// Detail says what is wrong with it, for a person to read. For a
	// named Field it goes on from the name ("must be greater than 0"), as
	// the problem's detail, which joins them, reads: "amount must be
	// greater than 0".
	Detail string `json:"detail"`
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
}

// writeProblem answers with p, as every problem of the module is written
// (see [contract.WriteProblem]).
func writeProblem(w http.ResponseWriter, p problem) {
	contract.WriteProblem(w, p.Status, p, 0)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, problem{Type: "about:blank", Title: "Internal Server Error", Status: http.StatusInternalServerError, Detail: err.Error()})
		return
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
