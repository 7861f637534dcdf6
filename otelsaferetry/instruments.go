package otelsaferetry

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// ScopeName is the instrumentation scope of the tracer and the meter: the
// package's import path.
const ScopeName = "github.com/saferetry/saferetry/otelsaferetry"

// Metric names, as listed in the package documentation.
const (
	// MetricAttempts counts attempts, by outcome, decision and reason.
	MetricAttempts = "saferetry.client.attempts"
	// MetricRetries counts retries, by reason.
	MetricRetries = "saferetry.client.retries"
	// MetricGaveUp counts operations stopped by a limit, by the limit.
	MetricGaveUp = "saferetry.client.operation.gave_up"
	// MetricBudgetExhausted counts retries that the retry budget refused.
	MetricBudgetExhausted = "saferetry.client.budget.exhausted"
	// MetricRetryWait is the histogram of the waits before retries.
	MetricRetryWait = "saferetry.client.retry.wait"
	// MetricOperationDuration is the histogram of operations' durations.
	MetricOperationDuration = "saferetry.client.operation.duration"
)

// Bucket boundaries, in seconds. A wait runs from a few milliseconds of
// backoff to the 30 s cap on Retry-After; an operation adds its round
// trips to its waits.
var (
	waitBuckets     = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}
)

// instruments are the package's metric instruments, made once per
// Transport.
type instruments struct {
	attempts, retries, gaveUp, budget metric.Int64Counter
	wait, duration                    metric.Float64Histogram
}

func newInstruments(mp metric.MeterProvider) *instruments {
	m := mp.Meter(ScopeName)
	return &instruments{
		attempts: counter(m, MetricAttempts, "{attempt}",
			"Attempts sent, by outcome and by what the Transport decided after them."),
		retries: counter(m, MetricRetries, "{retry}",
			"Retries decided, by reason."),
		gaveUp: counter(m, MetricGaveUp, "{operation}",
			"Logical operations that ended on a retryable outcome because a limit stopped the retries, by the limit."),
		budget: counter(m, MetricBudgetExhausted, "{retry}",
			"Retries refused because the Transport's retry budget was empty."),
		wait: histogram(m, MetricRetryWait, waitBuckets,
			"The wait chosen before each retry."),
		duration: histogram(m, MetricOperationDuration, durationBuckets,
			"Duration of logical operations, from RoundTrip to the final response's header or error, waits included."),
	}
}

// counter makes an Int64Counter; a provider that fails to make one is
// reported to the global error handler and replaced by a no-op counter.
func counter(m metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
	}
	if c == nil {
		c = noop.Int64Counter{}
	}
	return c
}

// histogram makes a Float64Histogram in seconds, as counter does.
func histogram(m metric.Meter, name string, buckets []float64, desc string) metric.Float64Histogram {
	h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(buckets...))
	if err != nil {
		otel.Handle(err)
	}
	if h == nil {
		h = noop.Float64Histogram{}
	}
	return h
}
