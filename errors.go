package saferetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The causes of an [*Error]: its Cause is one of these. Match them with
// errors.Is; errors.As finds the *Error, which has the details.
var (
	// ErrOutcomeUnknown means that no attempt got a final answer and at
	// least one may have reached the server: the operation may or may not
	// have happened. Retrying it later with the same key (see [WithKey] and
	// [Error.Key]) is safe against a server that honours the key.
	ErrOutcomeUnknown = errors.New("saferetry: outcome unknown")

	// ErrNotSent means that no attempt reached the server (every one failed
	// to connect, to the server or to its HTTP or SOCKS5 proxy, or the
	// request was rejected before sending): the operation certainly did not
	// happen. A failure to connect counts whatever its error: a dial that
	// the context or the attempt timeout ended, a CONNECT that the proxy
	// refused (403, 407) or dropped, a TLS handshake that failed. A base
	// RoundTripper other than net/http's, which reports no connection
	// through httptrace (GetConn, GotConn), is known not to have sent an
	// attempt only by its error (a refused dial); otherwise the attempt
	// counts as maybe sent, and the operation ends in ErrOutcomeUnknown,
	// the safe side.
	ErrNotSent = errors.New("saferetry: request not sent")

	// ErrInvalidKey means that a supplied Idempotency-Key is not 1 to 255
	// bytes of printable ASCII, the request carries several, a header
	// value is a broken sf-string or a raw key with a comma or double quote
	// (see [ParseKey]), or the header map holds the key under a
	// non-canonical name ("idempotency-key", assigned to the map directly,
	// which net/http would send as it is). Nothing was sent.
	ErrInvalidKey = errors.New("saferetry: invalid idempotency key")
)

// The sentinels an [*APIError] matches, by its status, when the server
// refused the request for its key. Match them with errors.Is; errors.As
// finds the *APIError, which has the status and the problem document.
var (
	// ErrKeyReused matches an [*APIError] for a 422 answer: the key was
	// already used with a different request.
	ErrKeyReused = errors.New("saferetry: idempotency key reused with a different request")

	// ErrInProgress matches an [*APIError] for a final 409 that is not a
	// replay: another attempt with the same key is still being processed.
	ErrInProgress = errors.New("saferetry: request with this idempotency key is in progress")
)

// Error reports a logical operation that ended without a final HTTP
// response. Cause is one of [ErrOutcomeUnknown], [ErrNotSent] or
// [ErrInvalidKey]; Err is the last transport or context error, so
// errors.Is(err, context.DeadlineExceeded) works through it.
//
// saferetry returns only Errors with a Cause; the zero Error reads as an
// unclassified failure and matches no sentinel. An Error is not modified after it
// is returned, so it may be read from several goroutines.
type Error struct {
	// Cause is the sentinel that classifies the failure.
	Cause error
	// Key is the operation's idempotency key; empty when it had none.
	Key string
	// Attempts is the number of attempts made; 0 when nothing was tried.
	Attempts int
	// StatusCode is the status of the last response received by an
	// earlier attempt, or 0 when no attempt got a response.
	StatusCode int
	// Reason is what stopped the retries: the Reason of the last attempt's
	// decision, the one its hooks got in [Attempt.Reason]. A limit that
	// gave up on an outcome the rules or the [Classifier] would have
	// retried names itself ([ReasonMaxAttempts], [ReasonBudgetExhausted],
	// [ReasonDeadline], [ReasonBodyNotReplayable], [ReasonNoKey],
	// [ReasonBackoffStop]: see [Reason.IsLimit]); an error that is not
	// retried gives its own reason ([ReasonPermanentError],
	// [ReasonClassifier]). It is [ReasonContextDone] when the context
	// ended, during an attempt or in the wait before a retry, and empty
	// when no attempt was made (Attempts is 0: a key or URL refused, a
	// body that could not be read, a context done before the first
	// attempt).
	Reason Reason
	// Err is the last underlying error; it may be nil. When the last
	// attempt's retry was given up because the request's GetBody failed
	// ([ReasonBodyNotReplayable]), it holds that error too.
	Err error
}

// Error describes the failure with its cause, attempts, key, the limit
// that gave up on retrying if one did (see [Reason.IsLimit]), and last
// error: "saferetry: outcome unknown after 4 attempts (key "k"; gave up:
// max attempts): EOF".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Cause != nil {
		b.WriteString(e.Cause.Error())
	} else {
		b.WriteString("saferetry: request failed")
	}
	if e.Attempts > 0 {
		b.WriteString(" after ")
		b.WriteString(strconv.Itoa(e.Attempts))
		if e.Attempts == 1 {
			b.WriteString(" attempt")
		} else {
			b.WriteString(" attempts")
		}
	}
	key, limit := e.Key != "" && e.Cause != ErrInvalidKey, e.Reason.IsLimit()
	if key || limit {
		b.WriteString(" (")
		if key {
			b.WriteString("key ")
			b.WriteString(strconv.Quote(e.Key))
		}
		if key && limit {
			b.WriteString("; ")
		}
		if limit {
			b.WriteString("gave up: ")
			b.WriteString(string(e.Reason))
		}
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause and the last error, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	for _, err := range [...]error{e.Cause, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Timeout reports whether the last error is a timeout or an expired
// deadline, so that a caller testing net/http errors with
// (*url.Error).Timeout or net.Error sees through an *Error.
func (e *Error) Timeout() bool {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// errorString is a plain detail message carried inside an [*Error].
type errorString string

func (s errorString) Error() string { return string(s) }

// APIError is the error [Client.Do] returns for a final response with a
// status of 400 or above. It matches [ErrKeyReused] for a 422 and
// [ErrInProgress] for a 409, unless the response is a replay of a stored
// answer (Idempotent-Replayed: true) or the request carried no key.
//
// [Client.Do] returns only filled-in APIErrors and does not modify them
// afterwards, so one may be read from several goroutines; the zero APIError
// stands for status 0 and matches no sentinel.
type APIError struct {
	// StatusCode is the HTTP status code, as in http.Response.
	StatusCode int
	// Header is the response header.
	Header http.Header
	// Key is the idempotency key the request carried; empty if none.
	Key string
	// Attempts is the number of attempts the operation took.
	Attempts int
	// Reason is why the operation ended on this status: the Reason of the
	// last attempt's decision, the one its hooks got in [Attempt.Reason].
	// A status that the rules do not retry (a 400, a 404, a 422) gives
	// [ReasonFinalStatus], as a success would; a replay [ReasonReplayed];
	// Stripe-Should-Retry [ReasonServerSaid]; the [Classifier]
	// [ReasonClassifier]. A retryable status (a 429, a 503) is returned
	// because a limit gave up on it, which it names ([ReasonMaxAttempts],
	// [ReasonBudgetExhausted], [ReasonDeadline], ...: see
	// [Reason.IsLimit]), or because the context ended
	// ([ReasonContextDone]).
	Reason Reason
	// Replayed is true when the server answered from its stored record.
	Replayed bool
	// Body holds the start of the response body, at most the Client's
	// error-body limit (64 KiB by default).
	Body []byte
	// BodyErr is the error that cut the reading of Body short (the
	// connection broke or the context ended before the body was whole),
	// nil when the body was read whole or up to the limit. The status
	// stands; Body and Problem are then what arrived, not the server's
	// whole document. An error answer that the server stored (a 4xx other
	// than 408 and 429) is replayed whole when asked for again with Key.
	BodyErr error
	// Problem is the parsed RFC 9457 problem document, or nil when the
	// response was not application/problem+json or did not parse.
	Problem *Problem
}

// Problem is an RFC 9457 problem document, as decoded into
// [APIError.Problem]; members it does not name are ignored. The zero
// Problem has no members. It is plain data, safe to read concurrently.
type Problem struct {
	// Type is the URI naming the kind of problem, such as
	// idempotency.ProblemKeyReused.
	Type string `json:"type,omitempty"`
	// Title is a short summary of the kind of problem.
	Title string `json:"title,omitempty"`
	// Status is the HTTP status the server gave in the document.
	Status int `json:"status,omitempty"`
	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`
	// Instance is a URI naming this occurrence.
	Instance string `json:"instance,omitempty"`
}

// Error describes the status, the problem detail if any, the key, and
// the error that cut the body short if any.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "saferetry: HTTP %d", e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" ")
		b.WriteString(t)
	}
	if e.Problem != nil {
		switch {
		case e.Problem.Detail != "":
			b.WriteString(": ")
			b.WriteString(e.Problem.Detail)
		case e.Problem.Title != "":
			b.WriteString(": ")
			b.WriteString(e.Problem.Title)
		}
	}
	if e.Key != "" {
		b.WriteString(" (key ")
		b.WriteString(strconv.Quote(e.Key))
		b.WriteString(")")
	}
	if e.BodyErr != nil {
		b.WriteString(" (body cut short: ")
		b.WriteString(e.BodyErr.Error())
		b.WriteString(")")
	}
	return b.String()
}

// Is reports whether e matches [ErrKeyReused] or [ErrInProgress].
func (e *APIError) Is(target error) bool {
	if e.Replayed || e.Key == "" {
		return false
	}
	switch target {
	case ErrKeyReused:
		return e.StatusCode == http.StatusUnprocessableEntity
	case ErrInProgress:
		return e.StatusCode == http.StatusConflict
	}
	return false
}
