package otelsaferetry

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry"
)

// Option configures [NewTransport] or [NewClient]. The zero Option (nil) is
// ignored. Options are applied in order, a later one overriding an earlier
// one of the same kind, except [WithRetryOptions], whose options add up.
// An Option is a plain function: one may be given to several Transports.
type Option func(*config)

// config is the resolved set of options; it is read-only once built.
type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagators    propagation.TextMapPropagator
	keyAttribute   bool
	attemptSpans   *bool // nil: decided by the base
	retryOptions   []saferetry.Option
}

func newConfig(opts []Option) *config {
	c := new(config)
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.propagators == nil {
		c.propagators = otel.GetTextMapPropagator()
	}
	return c
}

// WithTracerProvider sets the provider of the spans. nil, the default,
// means the global provider (otel.GetTracerProvider), read when the
// Transport is built; the global provider forwards to one set later.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}

// WithMeterProvider sets the provider of the metrics. nil, the default,
// means the global provider (otel.GetMeterProvider), read when the
// Transport is built.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithPropagators sets the propagators that write the trace context into
// each attempt's request headers, when the Transport makes the attempt
// spans (see [WithAttemptSpans]). nil, the default, means the global
// propagators (otel.GetTextMapPropagator), which propagate nothing until
// set, and from then on, also for a Transport made before.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagators = p }
}

// WithKeyAttribute makes the operation span carry the idempotency key in
// the saferetry.idempotency_key attribute. Off by default: a key may be
// chosen by the caller and tie an operation to a customer; without it, no
// span carries the key, not even the description of an operation's error
// status (the text of a [saferetry.Error], which names it). The key is
// never a metric attribute, whatever this option says.
func WithKeyAttribute(on bool) Option {
	return func(c *config) { c.keyAttribute = on }
}

// WithAttemptSpans says whether the Transport starts a client span for each
// attempt. By default it does, unless the base is an
// *otelhttp.Transport (go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp),
// which starts one of its own: two client spans for one request on the
// wire would count it twice. Give WithAttemptSpans(false) when the base
// makes client spans in another way (an otelhttp.Transport wrapped in a
// RoundTripper of yours, say); the attempts are then recorded as events of
// the operation span. See the package documentation.
func WithAttemptSpans(on bool) Option {
	return func(c *config) { c.attemptSpans = &on }
}

// WithRetryOptions configures the saferetry Transport (or Client) under the
// instrumentation, as the same options given to [saferetry.NewTransport]
// (or [saferetry.NewClient]) would. Given several times, the options add
// up, in order. Hooks set by [saferetry.WithHook] run before the
// instrumentation's own. [saferetry.WithBase] is overridden by the base
// given to [NewTransport] or [NewClient].
func WithRetryOptions(opts ...saferetry.Option) Option {
	return func(c *config) { c.retryOptions = append(c.retryOptions, opts...) }
}
