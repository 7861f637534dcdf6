package idempotency

import (
	"context"
	"time"
)

// Outcome names what the Middleware did with a request, for metrics and
// logs. Its values are the constants below, stable and fit for a metric
// label; the zero value "" is none of them. It is a plain string value.
type Outcome string

// Outcomes reported through WithHook.
const (
	// OutcomeNew: the handler ran and its outcome was stored.
	OutcomeNew Outcome = "new"
	// OutcomeReleased: the handler ran but its outcome is not stored (a 5xx,
	// 307, 308, 408 or 429 status, or a panic), so a retry runs it again. A
	// panic while the outcome was recorded that is not the store's (the
	// logger's) counts as the handler's: the claim is then left to its
	// lease, which the retry waits out.
	OutcomeReleased Outcome = "released"
	// OutcomeReplay: a stored outcome was replayed; the handler did not run.
	OutcomeReplay Outcome = "replay"
	// OutcomeInProgress: the key was held by a running request; answered 409.
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeMismatch: the key was used with a different fingerprint;
	// answered 422.
	OutcomeMismatch Outcome = "mismatch"
	// OutcomeLeaseLost: the request's claim was taken over (its lease lapsed)
	// while its handler ran; its outcome was not stored. It is also reported
	// when a retried Complete or Release found the claim no longer held and
	// the entry could not be read within the store timeout to tell whether
	// an earlier try, whose answer was lost, took effect: the claim is taken
	// for taken over, the answer that is safe either way, though its outcome
	// may be stored (a retry then replays it). Reported once per
	// request, on its own goroutine after the handler returned, whether a
	// renewal or the completion noticed the loss. Status is 409 when the
	// handler's storable answer was replaced (see the package
	// documentation), the handler's own status otherwise.
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomeStoreError: a store call failed. On claim, the request was
	// answered 503 (or, with WithFailOpen, run unprotected); after the
	// handler ran, its response was still sent but its outcome may not be
	// stored, except in transactional mode, where a failed commit rolled
	// the handler's work back and the request was answered 503
	// (ProblemCommitFailed). Err holds the cause.
	OutcomeStoreError Outcome = "store_error"
	// OutcomeTooLarge: the request body was over the limit; answered 413.
	OutcomeTooLarge Outcome = "too_large"
	// OutcomeOversize: the operation completed earlier with a response not
	// replayable (too large to store, or not sent whole); answered 410
	// without running the handler.
	OutcomeOversize Outcome = "oversize"
	// OutcomeMissingKey: a required key was absent; answered 400.
	OutcomeMissingKey Outcome = "missing_key"
	// OutcomeMalformedKey: the key did not parse; answered 400.
	OutcomeMalformedKey Outcome = "malformed_key"
	// OutcomeBadRequest: the request body could not be read; answered 400,
	// or 408 when it did not arrive before the server's read deadline.
	// When reading it (or a file of a form parsed before) panicked, the
	// request is not answered (Status 0) and the panic goes on.
	OutcomeBadRequest Outcome = "bad_request"
	// OutcomeDeclined: the store declined to claim the key
	// (ErrClaimDeclined) and the handler answered without a claim; its
	// answer is not stored, and Token is 0. A handler that panicked gives
	// it with ErrHandlerPanicked.
	OutcomeDeclined Outcome = "declined"
	// OutcomeScopeError: the scope function failed; answered 500. When it
	// panicked, the request is not answered (Status 0) and the panic goes
	// on.
	OutcomeScopeError Outcome = "scope_error"
)

// Event describes one outcome. Each protected request that carries a key
// (or lacks a required one) gives exactly one event. A request whose lease
// is lost gives OutcomeLeaseLost in place of its final outcome. Requests the Middleware lets through
// untouched (unprotected methods, no key when none is required) give none.
// The zero Event is not meaningful; the Middleware makes them. An Event is a
// value: the hook may keep it and read it from other goroutines.
type Event struct {
	// Outcome is what happened.
	Outcome Outcome
	// Key is the request's scope and key; zero when no key was parsed.
	// Its Scope is "" for OutcomeTooLarge, OutcomeBadRequest and
	// OutcomeScopeError, which are decided before the scope is known.
	Key Key
	// Token is the fencing token of the request's claim; 0 when it held
	// none.
	Token int64
	// TookOver reports that the claim was taken over from an earlier holder
	// whose lease had lapsed.
	TookOver bool
	// Repeat reports that the request found its key claimed or completed
	// by a request with the same fingerprint: a client's retry of an
	// operation under way or done, or a duplicate sent beside it. It is
	// true for every OutcomeReplay and OutcomeOversize, for an
	// OutcomeInProgress answered for another request's claim, and for
	// whatever became of a request that waited for one (WithWaitForResult):
	// a replay, a run once the key was let go, or a claim acquired too late
	// to run (OutcomeInProgress with an Err). It is false for a request
	// that found its key free, such as one whose own claim came back too
	// late, or used by another request (OutcomeMismatch).
	Repeat bool
	// Status is the HTTP status sent to the client; 0 when none was sent
	// (a panic before the response began to stream) or when WithFailOpen
	// handed the request to the handler unprotected.
	Status int
	// Method is the request's method, and Route the ServeMux pattern it
	// matched (Request.Pattern; "" when the Middleware wraps the mux, or
	// the router is another), for per-route metrics. Never label metrics
	// with Key, which is unbounded.
	Method, Route string
	// Duration is how long the Middleware had the request when the event
	// was given: from its admission to the outcome, the handler and the
	// store calls included; 0 for answers given on admission (missing or
	// malformed key, body too large or unreadable, scope error).
	Duration time.Duration
	// Err is the underlying error for OutcomeStoreError, OutcomeLeaseLost,
	// OutcomeScopeError, OutcomeMalformedKey and OutcomeBadRequest (an
	// error saying so when the scope function or reading the body
	// panicked). It is
	// ErrHandlerPanicked for OutcomeReleased (OutcomeDeclined) after a handler panic (the
	// panic itself goes on, with its own value), an error saying so for
	// OutcomeReleased after a panic that is not the store's while the
	// outcome was recorded or a lapsed claim taken over, the cause matching
	// ErrLeaseLost for OutcomeReleased after the Middleware cancelled the
	// handler for its lease, and an error saying so for the
	// OutcomeInProgress of a claim answered with under half its lease left
	// (the handler was not started); nil otherwise.
	Err error

	began time.Time       // the request's admission, for Duration
	ctx   context.Context // the request's context, for Context
}

// Context returns the context of the request the event is about, as the
// Middleware received it, so that a hook reaches what the request carries:
// its trace span (to put the outcome on it), its values. It may be done by
// the time the event is given (a client that left). It is
// context.Background() for an Event the Middleware did not make.
func (e Event) Context() context.Context {
	if e.ctx == nil {
		return context.Background()
	}
	return e.ctx
}
