package otelsaferetry

import (
	"net/http"
	"slices"

	"github.com/saferetry/saferetry"
)

// Transport is a [saferetry.Transport] with OpenTelemetry instrumentation:
// a span per logical operation, a client span per attempt under it, and
// the metrics listed in the package documentation. It keeps the
// RoundTripper contract as the saferetry Transport does (see
// [saferetry.Transport]): the caller's request is not modified, the
// trace context is written into each attempt's own copy of the headers,
// a response comes with a nil error and an error without a response.
//
// Use [NewTransport]; the zero Transport is not usable. A Transport is safe
// for concurrent use by multiple goroutines.
type Transport struct {
	op operationLayer // in front of a *saferetry.Transport
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport whose attempts go through base; nil
// base means [http.DefaultTransport]. The saferetry Transport under the
// instrumentation is configured by [WithRetryOptions].
//
// When base is an *otelhttp.Transport, or with WithAttemptSpans(false),
// the attempts' client spans are the base's; see [WithAttemptSpans].
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	cfg := newConfig(opts)
	if base == nil {
		base = http.DefaultTransport
	}
	tel := newTelemetry(cfg, base)
	retry := saferetry.NewTransport(tel.attemptBase(base), retryOptions(cfg, tel)...)
	return &Transport{op: operationLayer{tel: tel, next: retry}}
}

// retryOptions are the caller's saferetry options with the
// instrumentation's hook after the caller's own.
func retryOptions(cfg *config, tel *telemetry) []saferetry.Option {
	return append(slices.Clip(cfg.retryOptions), saferetry.WithHook(tel.observe))
}

// RoundTrip runs one logical operation, as [saferetry.Transport.RoundTrip]
// does, and records it. The operation span and the final attempt's span
// end when the response body is read to its end or closed (or at once,
// when there is no response, or when a panic goes through RoundTrip):
// close the body, as always.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.op.RoundTrip(req)
}

// CloseIdleConnections closes idle connections of the base, when it has
// such a method.
func (t *Transport) CloseIdleConnections() { t.op.CloseIdleConnections() }
