package otelsaferetry

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// attemptLayer is the RoundTripper between the saferetry Transport and the
// base: it starts one client span per attempt, a child of the operation
// span, with http.request.resend_count on every attempt after the first.
type attemptLayer struct {
	tel  *telemetry
	base http.RoundTripper
}

func (l *attemptLayer) RoundTrip(r *http.Request) (*http.Response, error) {
	op := operationFrom(r.Context())
	if op == nil || op.tel != l.tel {
		// Not an attempt of this Transport's operation (a context reused
		// for another instrumented client's request).
		return l.base.RoundTrip(r)
	}
	if op.attempt != nil && op.endIt {
		op.attempt.End() // the hook did not see it: cannot happen, but never leak a span
	}
	op.started++
	// The last attempt's answer, if it had a body, is the saferetry
	// Transport's to drain and close now, which ends its span.
	op.owed = nil
	op.releaseHeld()
	attrs := spanAttrs(op, r)
	if op.started > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(op.started-1))
	}
	ctx, span := l.tel.tracer.Start(r.Context(), attemptName(r.Method), kindClient, trace.WithAttributes(attrs...))
	// Known to the operation from here on, so that a panic through
	// RoundTrip (a propagator's, the base's) ends it too (see
	// operation.abandon).
	op.attempt, op.endIt = span, true
	out := r.WithContext(ctx)
	if len(l.tel.propagators.Fields()) > 0 {
		// Asked on every attempt: the global propagator has no fields
		// until otel.SetTextMapPropagator, which may come after the
		// Transport is made. The request is the saferetry Transport's,
		// not ours to change.
		out.Header = r.Header.Clone()
		l.tel.propagators.Inject(ctx, propagation.HeaderCarrier(out.Header))
	}
	resp, err := l.base.RoundTrip(out)
	op.endIt = resp == nil || err != nil
	if op.endIt {
		// The hook marks the error and ends the span: it gets the error
		// that the saferetry Transport made of a base breaking the
		// contract.
		return resp, err
	}
	if span.IsRecording() {
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
		if resp.StatusCode >= 400 {
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
			span.SetStatus(codes.Error, "")
		}
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		// No body will end the span (and the caller need not close an
		// empty one): the hook ends it, once it has written the decision
		// that followed the attempt on it.
		op.endIt = true
		return resp, nil
	}
	// Held until the hook has seen the attempt (see spanBody.hold): a
	// retried answer then until the Transport's drain reads it (see
	// spanBody.releaseOnRead), a final one until RoundTrip returns it.
	var b *spanBody
	resp.Body, b = newSpanBody(resp.Body, span)
	b.hold()
	op.held = b
	return resp, nil
}

// CloseIdleConnections closes the base's idle connections, for
// [saferetry.Transport.CloseIdleConnections].
func (l *attemptLayer) CloseIdleConnections() {
	if c, ok := l.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
