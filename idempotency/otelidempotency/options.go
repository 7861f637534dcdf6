package otelidempotency

import "go.opentelemetry.io/otel/metric"

// Option configures an Instrumentation in New. A nil Option is ignored.
// An Option is a plain function: one may be given to several New calls,
// from any goroutine.
type Option func(*config)

type config struct {
	provider   metric.MeterProvider
	scopeLabel func(scope string) string
}

// WithMeterProvider makes the Instrumentation create its instruments with
// mp. A nil mp, the default, uses the global provider (otel.GetMeterProvider),
// which records nothing until one is set.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.provider = mp }
}

// WithRetriesByScope turns on saferetry.server.retries: the requests that
// found their key already claimed or completed with the same request (a
// replay, a 409 in progress, a 410 oversize), counted per scope, which tells
// how often each client retries. The scope is the value of
// idempotency.WithScope (a tenant, a principal); label maps it to the
// value of the saferetry.scope attribute. Each distinct label is a time
// series of its own, so label must map scopes to a bounded set: return the
// scope itself only when there are few (tens, not thousands), a tier or a
// bucket otherwise. A label of "" is kept as "". A nil label, the default,
// leaves the instrument out.
func WithRetriesByScope(label func(scope string) string) Option {
	return func(c *config) { c.scopeLabel = label }
}
