package otelidempotency

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/saferetry/saferetry/internal/otelkit"
)

// ScopeName is the name of the instrumentation scope (the Meter) the
// instruments belong to.
const ScopeName = "github.com/saferetry/saferetry/idempotency/otelidempotency"

// Instrument names, following the OpenTelemetry naming rules; the package
// documentation lists their units, attributes and Prometheus names.
const (
	MetricRequests        = "saferetry.server.requests"
	MetricRequestDuration = "saferetry.server.request.duration"
	MetricHandlerDuration = "saferetry.server.handler.duration"
	MetricStoreDuration   = "saferetry.server.store.duration"
	MetricClaimsActive    = "saferetry.server.claims.active"
	MetricWaitersActive   = "saferetry.server.waiters.active"
	MetricTakeovers       = "saferetry.server.takeovers"
	MetricRetries         = "saferetry.server.retries"
)

// Bucket boundaries, in seconds: those of the OpenTelemetry HTTP semantic
// conventions for a request or a handler run, finer ones for a store call,
// which takes microseconds in memory and milliseconds over a network.
var (
	requestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	storeBuckets   = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
)

// Instrumentation measures an idempotency.Middleware with OpenTelemetry
// metrics: Hook counts its outcomes, WrapStore times its store calls and
// counts its waiters, Handler times the handler it protects and counts the
// claims held. Use the three together on one Middleware, or any of them.
// Several Middlewares may share one Instrumentation: their measurements add
// up, told apart by route.
//
// An Instrumentation is safe for concurrent use by multiple goroutines.
// The zero value is not usable: create one with New.
type Instrumentation struct {
	requests        metric.Int64Counter
	requestDuration metric.Float64Histogram
	handlerDuration metric.Float64Histogram
	storeDuration   metric.Float64Histogram
	claimsActive    metric.Int64UpDownCounter
	waitersActive   metric.Int64UpDownCounter
	takeovers       metric.Int64Counter
	retries         metric.Int64Counter // nil unless WithRetriesByScope
	scopeLabel      func(string) string

	outcomes otelkit.Cache[outcomeAttrs]
	routes   otelkit.Cache[routeAttrs]
	scopes   otelkit.Cache[scopeAttrs]
}

// New creates the instruments on the MeterProvider of WithMeterProvider (the
// global one by default) and returns the Instrumentation that records them.
// An instrument the provider cannot create is reported to otel.Handle and
// records nothing; the others work.
func New(opts ...Option) *Instrumentation {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.provider == nil {
		c.provider = otel.GetMeterProvider()
	}
	b := otelkit.NewBuilder(c.provider.Meter(ScopeName), "otelidempotency:")
	in := &Instrumentation{
		requests: b.Counter(MetricRequests, "{request}",
			"Protected requests by what the idempotency middleware did with them."),
		requestDuration: b.Histogram(MetricRequestDuration, requestBuckets,
			"How long the idempotency middleware had a request, from admission to its outcome."),
		handlerDuration: b.Histogram(MetricHandlerDuration, requestBuckets,
			"How long the protected handler ran under a claim."),
		storeDuration: b.Histogram(MetricStoreDuration, storeBuckets,
			"How long an idempotency store call took."),
		claimsActive: b.UpDown(MetricClaimsActive, "{claim}",
			"Protected handlers running under a claim."),
		waitersActive: b.UpDown(MetricWaitersActive, "{request}",
			"Duplicate requests waiting, with a store watch, for the request that holds their key."),
		takeovers: b.Counter(MetricTakeovers, "{takeover}",
			"Claims taken over from a holder whose lease had lapsed."),
		scopeLabel: c.scopeLabel,
	}
	if c.scopeLabel != nil {
		in.retries = b.Counter(MetricRetries, "{request}",
			"Requests that found their key claimed or completed by the same request before, per scope.")
	}
	b.Handle()
	return in
}
