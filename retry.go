package saferetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
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
	ReasonReplayed          Reason = "replayed"                  // 409 with Idempotent-Replayed: true
	ReasonRetryableStatus   Reason = "retryable status"          // 408, 409, 429, 5xx except 501
	ReasonRetryAfter        Reason = "retry-after"               // retryable status; the wait comes from Retry-After
	ReasonTransportError    Reason = "transport error"           // no response: refused, reset, EOF...
	ReasonAttemptTimeout    Reason = "attempt timeout"           // the per-attempt timeout expired
	ReasonPermanentError    Reason = "permanent error"           // TLS verification and similar
	ReasonNoKey             Reason = "unsafe method without key" // POST/PATCH/... without a key
	ReasonBodyNotReplayable Reason = "body not replayable"       // body over the buffer limit, or GetBody failed
	ReasonMaxAttempts       Reason = "max attempts"              // the attempt limit is reached
	ReasonBudgetExhausted   Reason = "retry budget exhausted"    // the Transport's retry budget is empty
	ReasonDeadline          Reason = "wait would pass deadline"  // the wait would end after the context deadline
	ReasonContextDone       Reason = "context done"              // the request context is canceled or expired
	ReasonBackoffStop       Reason = "backoff stopped"           // the backoff schedule returned backoff.Stop
	ReasonClassifier        Reason = "classifier"                // the user's Classifier decided
)

// Classifier overrides the built-in retry rules for one attempt. It gets
// the attempt's request and either its response (whose body it must not
// read) or its error, and returns [DecisionRetry], [DecisionReturn], or
// [DecisionDefault] to keep the built-in rule. Whatever it returns, an
// unsafe method without a key, a body that cannot be replayed, a done
// context, the attempt limit, the deadline and the retry budget still stop
// retries. It must be safe for concurrent use.
type Classifier func(req *http.Request, resp *http.Response, err error) Decision

// classify asks the user's Classifier, if any, about one attempt.
func (c *config) classify(req *http.Request, resp *http.Response, err error) Decision {
	if c.classifier == nil {
		return DecisionDefault
	}
	return c.classifier(req, resp, err)
}

// override applies the user's Classifier to the built-in decision retry.
func (c *config) override(req *http.Request, resp *http.Response, err error, retry bool) bool {
	switch c.classify(req, resp, err) {
	case DecisionRetry:
		return true
	case DecisionReturn:
		return false
	}
	return retry
}

// HeaderReplayed marks a response that the server answered from its stored
// record of an earlier attempt.
const HeaderReplayed = "Idempotent-Replayed"

// classifyStatus applies the contract's rules to a response.
func classifyStatus(resp *http.Response) (retry bool, reason Reason) {
	switch s := resp.StatusCode; {
	case s == http.StatusConflict:
		if strings.EqualFold(resp.Header.Get(HeaderReplayed), "true") {
			return false, ReasonReplayed
		}
		return true, ReasonRetryableStatus
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests:
		return true, ReasonRetryableStatus
	case s >= 500 && s != http.StatusNotImplemented && s <= 599:
		return true, ReasonRetryableStatus
	}
	return false, ReasonFinalStatus
}

// classifyError applies the contract's rules to an attempt that got no
// response. attemptCtx is the attempt's own context (with the per-attempt
// timeout, if any). sent is false only when the request certainly did not
// reach the server.
func classifyError(attemptCtx context.Context, err error) (retry bool, reason Reason, sent bool) {
	if attemptCtx.Err() != nil {
		return true, ReasonAttemptTimeout, true
	}
	if permanentError(err) {
		return false, ReasonPermanentError, false
	}
	return true, ReasonTransportError, !dialError(err)
}

// permanentError reports errors that another attempt cannot cure: the
// request URL is invalid, the server's certificate does not verify, or it
// does not speak TLS.
func permanentError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
	)
	return errors.Is(err, errBadURL) || errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record)
}

// dialError reports a failure to connect: the request was not written.
func dialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retriedWithoutKey reports the methods that are retried even without a
// key because repeating them is harmless (RFC 9110 safe or idempotent).
func retriedWithoutKey(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
