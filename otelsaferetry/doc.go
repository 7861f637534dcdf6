// Package otelsaferetry instruments the saferetry client with OpenTelemetry:
// traces and metrics of logical operations and of their attempts. It lives
// in a package of its own so that the saferetry package itself depends on
// no OpenTelemetry module.
//
// [NewTransport] returns an instrumented [saferetry.Transport], [NewClient]
// an instrumented [saferetry.Client]; [WithRetryOptions] passes saferetry's
// own options through:
//
//	rt := otelsaferetry.NewTransport(nil,
//		otelsaferetry.WithRetryOptions(saferetry.WithMaxAttempts(3)))
//	client := &http.Client{Transport: rt}
//
// # Spans
//
// Each logical operation (one RoundTrip) is an INTERNAL span named
// "saferetry {method}", a child of the span in the request's context. Each
// attempt is a CLIENT span named "{method}" under it, as the OpenTelemetry
// HTTP conventions describe resends: one client span per request on the
// wire, http.request.resend_count on every one after the first (1 on the
// second attempt, 2 on the third). The attempt span carries what the
// Transport decided after it (saferetry.decision, saferetry.reason,
// saferetry.retry.wait); the trace context of the attempt span goes into
// the attempt's request headers through the propagators (see
// [WithPropagators]). The operation span carries the number of attempts,
// the reason the operation ended, and its final status or error; with
// [WithKeyAttribute], also its idempotency key. A span ends when its
// response body is read to the end or closed, or at once when there is no
// response (also when a panic from the base or a hook goes through
// RoundTrip: the spans under way then end as errors).
//
// With otelhttp (go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp)
// as the base, its client spans are the attempt spans: an *otelhttp.Transport
// given as the base is recognised and the Transport starts no client span
// of its own, so that one request on the wire is one client span and one
// http.client.request.duration measurement (otelhttp's), not two. The
// otelhttp spans are children of the operation span; the attempts'
// resend count and decisions are then events named "saferetry.attempt" on
// the operation span. A base that wraps otelhttp cannot be recognised: give
// WithAttemptSpans(false) (see [WithAttemptSpans]). This package records no
// http.client.* metric of its own, so otelhttp's are never counted twice.
//
// # Metrics
//
// Names follow the OpenTelemetry naming rules; durations are in seconds.
// The idempotency key is never a metric attribute.
//
//	| name                                | instrument       | unit        | attributes                             |
//	|-------------------------------------|------------------|-------------|----------------------------------------|
//	| saferetry.client.attempts           | Int64Counter     | {attempt}   | common, outcome, decision, reason      |
//	| saferetry.client.retries            | Int64Counter     | {retry}     | common, reason                         |
//	| saferetry.client.retry.wait         | Float64Histogram | s           | common, reason                         |
//	| saferetry.client.budget.exhausted   | Int64Counter     | {retry}     | common                                 |
//	| saferetry.client.operation.gave_up  | Int64Counter     | {operation} | common, reason                         |
//	| saferetry.client.operation.duration | Float64Histogram | s           | common, outcome, reason (when any)     |
//
// "common" is http.request.method, server.address and server.port. An
// attempt is counted once, after the decision that followed it; a retry
// once it is decided, with the wait chosen for it; budget.exhausted counts
// retries the retry budget refused. operation.gave_up counts operations
// that ended on an outcome the rules would retry because a limit stopped
// them, with that limit as reason: "max attempts", "retry budget
// exhausted", "wait would pass deadline", "backoff stopped", "unsafe method
// without key", "body not replayable", or "context done" when the
// context ended the operation without a response (also while it waited
// for its next attempt). operation.duration runs from RoundTrip to the
// final response's header or error, waits included; its reason is that of
// the last decision, absent when no attempt was made (an invalid key, say).
//
// # Attributes
//
//	| attribute                  | type   | on                                | value                                                        |
//	|----------------------------|--------|-----------------------------------|--------------------------------------------------------------|
//	| http.request.method        | string | spans, metrics                    | the method; _OTHER when unknown (http.request.method_original, on spans only, then names it) |
//	| server.address             | string | spans, metrics                    | the URL's host                                               |
//	| server.port                | int    | spans, metrics                    | the URL's port, else 80 or 443 by scheme                     |
//	| url.full                   | string | spans                             | the URL, credentials and signature parameters REDACTED       |
//	| http.request.resend_count  | int    | attempt spans, attempt events     | attempt number - 1, from the second attempt on (0 on events) |
//	| http.response.status_code  | int    | spans, attempt events             | the status                                                   |
//	| error.type                 | string | spans, attempt events             | the status for 400 and above; the error's type; saferetry.refused for an attempt net/http refused before sending; saferetry.outcome_unknown, saferetry.not_sent or saferetry.invalid_key for an operation's error |
//	| saferetry.outcome          | string | attempts, operation.duration      | 1xx, 2xx, 3xx, 4xx, 5xx, or error when no response           |
//	| saferetry.decision         | string | attempt spans and events, attempts | retry or return                                             |
//	| saferetry.reason           | string | spans, attempt events, metrics    | a saferetry.Reason: "retryable status", "max attempts", ...  |
//	| saferetry.retry.wait       | double | attempt spans, attempt events     | the wait before the next attempt, seconds (retries only)     |
//	| saferetry.attempts         | int    | operation span                    | the attempts made                                            |
//	| saferetry.idempotency_key  | string | operation span                    | the key, only with WithKeyAttribute(true)                    |
//
// The instrumentation's cost is paid only by a Transport built here: a
// [saferetry.Transport] without it makes no span and records nothing.
package otelsaferetry
