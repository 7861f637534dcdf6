package otelsaferetry

import (
	"go.opentelemetry.io/otel/metric"

	"github.com/saferetry/saferetry/internal/otelkit"
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
// Transport, and the attribute sets they have measured with. They are safe
// for concurrent use.
type instruments struct {
	attempts, retries, gaveUp, budget metric.Int64Counter
	wait, duration                    metric.Float64Histogram

	sets otelkit.Cache[series]
}

// newInstruments makes the instruments on mp. An instrument the provider
// cannot make is reported to otel.Handle and records nothing; the others
// work.
func newInstruments(mp metric.MeterProvider) *instruments {
	b := otelkit.NewBuilder(mp.Meter(ScopeName), "otelsaferetry:")
	ins := &instruments{
		attempts: b.Counter(MetricAttempts, "{attempt}",
			"Attempts sent, by outcome and by what the Transport decided after them."),
		retries: b.Counter(MetricRetries, "{retry}",
			"Retries decided, by reason."),
		gaveUp: b.Counter(MetricGaveUp, "{operation}",
			"Logical operations that ended on a retryable outcome because a limit stopped the retries, by the limit."),
		budget: b.Counter(MetricBudgetExhausted, "{retry}",
			"Retries refused because the Transport's retry budget was empty."),
		wait: b.Histogram(MetricRetryWait, waitBuckets,
			"The wait chosen before each retry."),
		duration: b.Histogram(MetricOperationDuration, durationBuckets,
			"Duration of logical operations, from RoundTrip to the final response's header or error, waits included."),
	}
	b.Handle()
	return ins
}
