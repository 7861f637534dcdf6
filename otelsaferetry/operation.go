package otelsaferetry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/otelkit"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// operation is the instrumentation's state of one logical operation. The
// attempt layer and the hook find it in the context of each attempt's
// request. All of its fields are used by the goroutine running RoundTrip
// (the saferetry Transport makes its attempts and calls its hooks there,
// one after the other), so it needs no lock.
type operation struct {
	tel   *telemetry
	ctx   context.Context // what the operation layer gave the saferetry Transport
	span  trace.Span
	attrs []attribute.KeyValue // method and server: every metric's, in common
	url   attribute.KeyValue   // url.full, for the spans; invalid when the request has no URL

	started int               // attempts sent through the attempt layer
	attempt trace.Span        // the attempt's span, from its start until the hook saw it
	endIt   bool              // the hook ends attempt: it got no response, or one without a body
	owed    trace.Span        // the attempt span the hook left to its response's body to end, until the next attempt
	held    *spanBody         // the attempt's answer whose body may not end its span yet (see spanBody.hold)
	last    saferetry.Attempt // the last attempt the hook saw

	common  [4]attribute.KeyValue
	scratch [8]attribute.KeyValue // see with
}

type operationKey struct{}

// operationFrom returns the operation whose attempt ctx belongs to, or nil.
// An attempt's context shows the operation to anything made on it too: a
// request made on it (by a hook, or on a response's context) and sent
// through the saferetry Transport alone is another saferetry operation,
// whose attempts are not this operation's. They are told apart by the
// innermost saferetry operation of ctx, which for this operation's own
// attempts was given the operation layer's context.
func operationFrom(ctx context.Context) *operation {
	op, _ := ctx.Value(operationKey{}).(*operation)
	if op == nil {
		return nil
	}
	if w := retrypolicy.Of(ctx); w == nil || w.Parent() != op.ctx {
		return nil
	}
	return op
}

func newOperation(tel *telemetry, r *http.Request) *operation {
	op := &operation{tel: tel}
	op.attrs = appendRequest(op.common[:0], r)
	return op
}

// with returns the common attributes followed by kv, in op's scratch
// space: the result is good until the next call. Attribute options and
// sets copy what they are given.
func (op *operation) with(kv ...attribute.KeyValue) []attribute.KeyValue {
	return append(append(op.scratch[:0], op.attrs...), kv...)
}

// set returns the measurement options of the common attributes followed
// by kv, made once per Transport for each distinct set.
func (op *operation) set(kv ...attribute.KeyValue) otelkit.Opts {
	if len(op.attrs)+len(kv) > len(series{}) {
		return otelkit.NewOpts(op.with(kv...)...) // cannot happen: see series
	}
	var k series
	copy(k[copy(k[:], op.attrs):], kv)
	return op.tel.ins.sets.Get(k, series.opts)
}

// series names the attribute set of a measurement: its attributes in
// order, the unused ones zero. Six are enough: the common ones (at most 3,
// see appendRequest) and an instrument's own (at most 3).
type series [6]attribute.KeyValue

func (k series) opts() otelkit.Opts {
	n := 0
	for n < len(k) && k[n].Key != "" {
		n++
	}
	return otelkit.NewOpts(k[:n]...)
}

var (
	kindInternal = trace.WithSpanKind(trace.SpanKindInternal)
	kindClient   = trace.WithSpanKind(trace.SpanKindClient)
)

// operationLayer is the RoundTripper outside the saferetry Transport: it
// starts the operation span and records the operation's metrics.
type operationLayer struct {
	tel  *telemetry
	next http.RoundTripper // the saferetry Transport
}

func (l *operationLayer) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	op := newOperation(l.tel, req)
	if req.URL != nil {
		// Without one, the saferetry Transport refuses the request: the
		// span records that, without url.full.
		op.url = fullURL(req.URL)
	}
	ctx, span := l.tel.tracer.Start(req.Context(), operationName(req.Method),
		kindInternal, trace.WithAttributes(spanAttrs(op, req)...))
	op.span = span
	ctx = context.WithValue(ctx, operationKey{}, op)
	op.ctx = ctx
	returned := false
	defer func() {
		if !returned {
			op.abandon()
		}
	}()
	resp, err := l.next.RoundTrip(req.WithContext(ctx))
	returned = true
	op.releaseHeld()
	op.end(ctx, time.Since(start), resp, err)
	if resp != nil {
		resp.Body = endOnClose(resp.Body, span)
	} else {
		span.End()
	}
	return resp, err
}

// CloseIdleConnections closes idle connections of the saferetry Transport's
// base, when it has such a method.
func (l *operationLayer) CloseIdleConnections() {
	if c, ok := l.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// end records the operation's metrics and its outcome on its span, which
// it leaves open.
func (op *operation) end(ctx context.Context, took time.Duration, resp *http.Response, err error) {
	if op.attempt != nil && op.endIt {
		op.attempt.End() // not seen by the hook: cannot happen, but never leak a span
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	reason := op.last.Reason
	if op.last.Decision == saferetry.DecisionRetry {
		// The context ended the wait for the next attempt.
		reason = saferetry.ReasonContextDone
	}
	ins := op.tel.ins
	if ins.duration.Enabled(ctx) {
		kv := []attribute.KeyValue{outcome(status)}
		if reason != "" {
			kv = append(kv, AttributeReason.String(string(reason)))
		}
		ins.duration.Record(ctx, took.Seconds(), op.set(kv...).Rec...)
	}
	if gaveUp(reason, resp == nil) && ins.gaveUp.Enabled(ctx) {
		ins.gaveUp.Add(ctx, 1, op.set(AttributeReason.String(string(reason))).Add...)
	}
	if op.span.IsRecording() {
		op.annotate(status, reason, err)
	}
}

// releaseHeld lets the held answer's body end its span (see
// spanBody.hold): the next attempt starts, or RoundTrip returned it. (The
// hook lets the drain of a retried answer release it before, with its
// first read: see spanBody.releaseOnRead.)
func (op *operation) releaseHeld() {
	if op.held != nil {
		op.held.release()
		op.held = nil
	}
}

// abandon ends the spans of an operation whose RoundTrip did not return:
// a panic (in the base, in a hook, in the logger) went through it, leaving
// no response whose body would end them. The attempt span under way, if
// any, ends first, then the one the hook left to a response's body (which
// a panic after the hook, in the logger say, keeps from the caller), then
// the operation span, all marked as errors. (The saferetry Transport
// drains a retried answer's body during the wait, which ends its span:
// the attempt layer forgets that span when the next attempt starts.) The
// panic goes on as it was, and the operation's metrics are not recorded.
func (op *operation) abandon() {
	const msg = "saferetry: RoundTrip did not return (panic)"
	for _, s := range [...]trace.Span{op.attempt, op.owed} {
		if s != nil {
			s.SetStatus(codes.Error, msg)
			s.End()
		}
	}
	op.span.SetStatus(codes.Error, msg)
	op.span.End()
}

// annotate writes the operation's outcome on its span.
func (op *operation) annotate(status int, reason saferetry.Reason, err error) {
	span := op.span
	span.SetAttributes(AttributeAttempts.Int(op.last.Number))
	if reason != "" {
		span.SetAttributes(AttributeReason.String(string(reason)))
	}
	switch {
	case err != nil:
		span.SetAttributes(errorType(err))
		span.SetStatus(codes.Error, op.statusText(err))
	case status >= 400:
		span.SetAttributes(semconv.HTTPResponseStatusCode(status), semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	default:
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
}

// statusText is the description of the error status of an operation that
// ended with err: its text, without the idempotency key that a
// *saferetry.Error names, unless WithKeyAttribute lets the span carry it.
func (op *operation) statusText(err error) string {
	e, ok := err.(*saferetry.Error) // what the saferetry Transport returns
	if !ok || e.Key == "" || op.tel.keyAttribute {
		return err.Error()
	}
	anon := *e
	anon.Key = ""
	return anon.Error()
}

// gaveUp reports whether an operation that ended for reason stopped on a
// retryable outcome because of a limit. A done context counts only when it
// left the operation without a response: it also ends an operation that
// got a final answer, with that answer.
func gaveUp(reason saferetry.Reason, noResponse bool) bool {
	return reason.IsLimit() || (reason == saferetry.ReasonContextDone && noResponse)
}
