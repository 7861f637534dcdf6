package otelsaferetry

import (
	"net/http"

	"github.com/saferetry/saferetry"
)

// NewClient returns a [saferetry.Client] instrumented as [NewTransport]
// instruments a Transport, whose attempts go through base; nil base means
// [http.DefaultTransport]. The Client is configured by [WithRetryOptions]:
// with [saferetry.WithHTTPClient], that client's Timeout, Jar and
// CheckRedirect are kept, but its Transport gives way to base, as does
// [saferetry.WithBase].
//
// The operation layer is put into the Client's http.Client, in front of the
// saferetry Transport (see [saferetry.Client.HTTPClient]), so that
// [saferetry.Client.Do] and requests sent through HTTPClient are both
// recorded; change that http.Client's Transport and they no longer are.
// Requests sent through [saferetry.Client.Transport] itself skip that
// layer: their attempts are counted, but they make no span.
func NewClient(base http.RoundTripper, opts ...Option) *saferetry.Client {
	cfg := newConfig(opts)
	if base == nil {
		base = http.DefaultTransport
	}
	tel := newTelemetry(cfg, base)
	ropts := append(retryOptions(cfg, tel), saferetry.WithBase(tel.attemptBase(base)))
	c := saferetry.NewClient(ropts...)
	hc := c.HTTPClient()
	hc.Transport = &operationLayer{tel: tel, next: hc.Transport}
	return c
}
