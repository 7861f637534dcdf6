package saferetry

import (
	"net/http"

	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// Decision is what happens after an attempt. The zero value is
// [DecisionDefault]. It is a plain value, safe to share.
type Decision uint8

const (
	// DecisionDefault, returned by a [Classifier], keeps the built-in
	// decision. It never appears in an [Attempt].
	DecisionDefault Decision = iota
	// DecisionRetry makes another attempt after a wait.
	DecisionRetry
	// DecisionReturn ends the operation with this attempt's outcome.
	DecisionReturn
)

// String returns "retry", "return" or "default".
func (d Decision) String() string {
	switch d {
	case DecisionRetry:
		return "retry"
	case DecisionReturn:
		return "return"
	}
	return "default"
}

// Reason explains a [Decision] in an [Attempt]; its values are the
// constants below, and the empty Reason means none was given. It is a plain
// string value, stable and fit for a metric label.
type Reason string

// Reasons reported in [Attempt.Reason].
const (
	ReasonFinalStatus       Reason = "final status"              // a status that is not retried
	ReasonReplayed          Reason = "replayed"                  // any status with Idempotent-Replayed: true: the recorded outcome
	ReasonServerSaid        Reason = "server said"               // Stripe-Should-Retry: true or false decided
	ReasonRetryableStatus   Reason = "retryable status"          // 408, 409, 429, 5xx except 501
	ReasonRetryAfter        Reason = "retry-after"               // retryable status; the wait honours Retry-After (at least the backoff's)
	ReasonTransportError    Reason = "transport error"           // no response: refused, reset, EOF...
	ReasonAttemptTimeout    Reason = "attempt timeout"           // the per-attempt timeout expired
	ReasonPermanentError    Reason = "permanent error"           // TLS verification, a TLS handshake refused for the client's configuration, and similar
	ReasonNoKey             Reason = "unsafe method without key" // POST/PATCH/... without a key
	ReasonBodyNotReplayable Reason = "body not replayable"       // body over the buffer limit, or GetBody failed
	ReasonMaxAttempts       Reason = "max attempts"              // the attempt limit is reached
	ReasonBudgetExhausted   Reason = "retry budget exhausted"    // the Transport's retry budget is empty
	ReasonDeadline          Reason = "wait would pass deadline"  // the wait would end after the context deadline
	ReasonContextDone       Reason = "context done"              // the request context is canceled or expired
	ReasonBackoffStop       Reason = "backoff stopped"           // the backoff schedule returned backoff.Stop
	ReasonClassifier        Reason = "classifier"                // the user's Classifier decided (or, in saferetryablehttp, a CheckRetry of the user's around its own)
)

// Classifier overrides the built-in retry rules for one attempt. It gets
// the attempt's request and either its response (whose body it must not
// read) or its error, and returns [DecisionRetry], [DecisionReturn], or
// [DecisionDefault] to keep the built-in rule. Whatever it returns, an
// unsafe method without a key, a body that cannot be replayed, a done
// context, the attempt limit, the deadline and the retry budget still stop
// retries. It must be safe for concurrent use.
type Classifier func(req *http.Request, resp *http.Response, err error) Decision

// HeaderReplayed is "Idempotent-Replayed", the header marking a response
// that the server answered from its stored record of an earlier attempt.
const HeaderReplayed = contract.HeaderReplayed

// reasonOf is the Reason that a retry policy reason stands for: its
// name, which is the value of the constant above of the same name
// (TestPolicyValuesMapOntoTheAPI holds them together).
func reasonOf(r retrypolicy.Reason) Reason { return Reason(r.String()) }

// IsLimit reports whether r names a limit that ended an operation on an
// outcome that the built-in rules or the [Classifier] would have retried:
// [ReasonNoKey], [ReasonBodyNotReplayable], [ReasonMaxAttempts],
// [ReasonBackoffStop], [ReasonDeadline] or [ReasonBudgetExhausted]. An
// [Attempt] whose Decision is DecisionReturn with such a Reason is a
// give-up. [ReasonContextDone] is not among them: a done context ends an
// operation whatever its outcome, a final answer included.
func (r Reason) IsLimit() bool {
	for p := retrypolicy.Reason(1); p < retrypolicy.NumReasons; p++ {
		if reasonOf(p) == r {
			return p.Limit()
		}
	}
	return false
}

// decision is the Decision of a verdict.
func decision(retry bool) Decision {
	if retry {
		return DecisionRetry
	}
	return DecisionReturn
}

// ReasonFromResponse returns why the operation that got resp ended on it:
// the Reason of its last attempt's decision, the one the hooks got in
// [Attempt.Reason] and that [APIError.Reason] carries. A status the rules
// do not retry gives [ReasonFinalStatus], a replay [ReasonReplayed]; a
// retryable status (a 503, a 429) is returned because a limit gave up on
// it, which it names ([ReasonMaxAttempts], [ReasonBudgetExhausted],
// [ReasonDeadline], ...: see [Reason.IsLimit]). It is for a caller of a
// plain [http.Client] over the [Transport], whose answers carry no
// [*APIError], and of a go-retryablehttp client configured by package
// saferetryablehttp; an operation that ended without an answer tells its Reason
// in its [*Error] (see errors.As).
//
// It reads the context of resp's Request, which the Transport's answers
// carry: it reports false when resp or its Request is nil, or when that
// context is no Transport's (a base that answers with a request of its
// own). Under several Transports it is the innermost one's operation; a
// request sent elsewhere on the context of an operation's attempt (from
// a hook) gets that operation's Reason. It allocates nothing and may be
// called from any goroutine.
func ReasonFromResponse(resp *http.Response) (Reason, bool) {
	if resp == nil || resp.Request == nil {
		return "", false
	}
	w := retrypolicy.Of(resp.Request.Context())
	if w == nil {
		return "", false
	}
	r := reasonOf(w.Reason())
	return r, r != ""
}
