package otelsaferetry

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry"
)

// observe is the saferetry hook: it counts the attempt, the retry and its
// wait, and a refusal by the budget, and writes the decision on the
// attempt's span (or, without attempt spans, as an event of the operation
// span).
func (tel *telemetry) observe(a saferetry.Attempt) {
	ctx := a.Request.Context()
	op := operationFrom(ctx)
	if op == nil || op.tel != tel {
		// Not under the operation layer (a request sent through the
		// saferetry Transport alone, e.g. on an attempt's context): count it.
		tel.count(newOperation(tel, a.Request), a)
		return
	}
	op.last = a
	// Not the request: a key kept after the call keeps its operation, and
	// with it this one, which must not keep the attempt's body.
	op.last.Request = nil
	tel.count(op, a)
	if tel.keyAttribute && a.Number == 1 && a.Key != "" {
		op.span.SetAttributes(AttributeKey.String(a.Key))
	}
	switch {
	case op.attempt != nil:
		span := op.attempt
		if span.IsRecording() {
			span.SetAttributes(decided(a)...)
			if op.endIt && a.Err != nil {
				span.SetAttributes(attemptErrorType(a.Err))
				span.SetStatus(codes.Error, a.Err.Error())
			}
		}
		if op.endIt {
			span.End()
		} else {
			op.owed = span
			if a.Decision == saferetry.DecisionRetry && op.held != nil {
				// The saferetry Transport drains the answer during
				// the wait, which ends the span; a panic after the
				// hook (the logger's) closes it unread, and leaves
				// the span to operation.abandon.
				op.held.releaseOnRead()
			}
		}
		op.attempt, op.endIt = nil, false
	case !tel.attemptSpans && op.span.IsRecording():
		op.span.AddEvent("saferetry.attempt", trace.WithAttributes(attemptEvent(a)...))
	}
}

// count records the attempt's metrics.
func (tel *telemetry) count(op *operation, a saferetry.Attempt) {
	ctx := a.Request.Context()
	ins := tel.ins
	reason := AttributeReason.String(string(a.Reason))
	if ins.attempts.Enabled(ctx) {
		ins.attempts.Add(ctx, 1, op.set(outcome(a.StatusCode), AttributeDecision.String(a.Decision.String()), reason).Add...)
	}
	if a.Decision == saferetry.DecisionRetry && (ins.retries.Enabled(ctx) || ins.wait.Enabled(ctx)) {
		set := op.set(reason)
		ins.retries.Add(ctx, 1, set.Add...)
		ins.wait.Record(ctx, a.Wait.Seconds(), set.Rec...)
	}
	if a.Reason == saferetry.ReasonBudgetExhausted && ins.budget.Enabled(ctx) {
		ins.budget.Add(ctx, 1, op.set().Add...)
	}
}

// decided is the attributes of the decision after an attempt.
func decided(a saferetry.Attempt) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		AttributeDecision.String(a.Decision.String()),
		AttributeReason.String(string(a.Reason)),
	}
	if a.Decision == saferetry.DecisionRetry {
		kv = append(kv, AttributeRetryWait.Float64(a.Wait.Seconds()))
	}
	return kv
}

// attemptEvent is the attributes of an attempt's event on the operation
// span: what its client span would have said.
func attemptEvent(a saferetry.Attempt) []attribute.KeyValue {
	kv := append(decided(a), semconv.HTTPRequestResendCount(a.Number-1))
	if a.Err != nil {
		return append(kv, attemptErrorType(a.Err))
	}
	kv = append(kv, semconv.HTTPResponseStatusCode(a.StatusCode))
	if a.StatusCode >= 400 {
		// As on an attempt span: an error status is the attempt's error.type.
		kv = append(kv, semconv.ErrorTypeKey.String(strconv.Itoa(a.StatusCode)))
	}
	return kv
}
