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
// While held (see hold), the end waits for release.
type spanBody struct {
	io.ReadCloser
	span   trace.Span
	held   atomic.Bool
	onRead atomic.Bool // the first Read releases the hold (see releaseOnRead)
	done   atomic.Bool // read to the end or closed
	ended  atomic.Bool
}

func (b *spanBody) Read(p []byte) (int, error) {
	if b.onRead.CompareAndSwap(true, false) {
		b.release()
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		b.finish()
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
	b.finish()
	return err
}

// hold keeps the span from ending with the body until release: the body
// of an attempt's answer is closed by the saferetry Transport when a
// panic goes through its decision (from the classifier, a hook or the
// logger), and the span must then be left to operation.abandon, which
// marks it, rather than end as if all went well.
func (b *spanBody) hold() { b.held.Store(true) }

// releaseOnRead lets the first Read release the hold: the saferetry
// Transport's drain of a retried answer reads it before it closes it,
// while the close of a panic going through the decision reads nothing,
// so that the span of an answer that is no error status is not ended as
// if all went well before operation.abandon marks it.
func (b *spanBody) releaseOnRead() { b.onRead.Store(true) }

// release lets the span end with the body, at once if the body is done.
func (b *spanBody) release() {
	b.held.Store(false)
	if b.done.Load() {
		b.end()
	}
}

// finish ends the span of a body that is done, unless it is held. With
// release, whichever of the two comes last ends it.
func (b *spanBody) finish() {
	b.done.Store(true)
	if !b.held.Load() {
		b.end()
	}
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
	rc, _ := newSpanBody(body, span)
	return rc
}

// newSpanBody is endOnClose, which also returns the spanBody, nil for an
// empty body (whose span has ended).
func newSpanBody(body io.ReadCloser, span trace.Span) (io.ReadCloser, *spanBody) {
	if body == nil || body == http.NoBody {
		span.End()
		return http.NoBody, nil
	}
	b := &spanBody{ReadCloser: body, span: span}
	if w, ok := body.(io.Writer); ok {
		return &spanBodyWriter{spanBody: b, Writer: w}, b
	}
	return b, b
}
