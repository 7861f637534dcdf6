package otelsaferetry

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// spanBody ends a span when its response body is read to the end or
// closed, whichever comes first, as otelhttp's spans end: the request is
// over when its answer is. A read error other than EOF marks the span.
type spanBody struct {
	io.ReadCloser
	span  trace.Span
	ended atomic.Bool
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		b.end()
	default:
		b.span.SetAttributes(semconv.ErrorType(err))
		b.span.SetStatus(codes.Error, err.Error())
	}
	return n, err
}

// Close closes the body, then ends the span, so that an inner span (the
// attempt's, under the operation's) ends first.
func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *spanBody) end() {
	if b.ended.CompareAndSwap(false, true) {
		b.span.End()
	}
}

// spanBodyWriter keeps a writable body writable, as the body of a 101
// Switching Protocols response must stay.
type spanBodyWriter struct {
	*spanBody
	io.Writer
}

// endOnClose wraps body so that the span ends with it. An empty body
// (http.NoBody, or nil from a broken base) ends the span at once and stays
// http.NoBody: callers often leave the body of a HEAD, 204 or 304 answer
// unclosed, and compare it with http.NoBody.
func endOnClose(body io.ReadCloser, span trace.Span) io.ReadCloser {
	if body == nil || body == http.NoBody {
		span.End()
		return http.NoBody
	}
	b := &spanBody{ReadCloser: body, span: span}
	if w, ok := body.(io.Writer); ok {
		return &spanBodyWriter{spanBody: b, Writer: w}
	}
	return b
}
