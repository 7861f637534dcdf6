package otelkit

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Builder makes instruments on one Meter and keeps their errors: an
// instrument the provider cannot make is replaced by a no-op one, and
// [Builder.Handle] reports the errors. A Builder is used by one goroutine.
type Builder struct {
	m      metric.Meter
	prefix string
	err    error
}

// NewBuilder returns a Builder of instruments on m, whose errors are
// prefixed with prefix (the package's name and a colon).
func NewBuilder(m metric.Meter, prefix string) *Builder {
	return &Builder{m: m, prefix: prefix}
}

// made keeps err and returns inst, or fallback (a no-op instrument) when
// the provider made none.
func made[I comparable](b *Builder, inst I, err error, fallback I) I {
	if err != nil {
		b.err = errors.Join(b.err, fmt.Errorf("%s %w", b.prefix, err))
	}
	var none I
	if inst == none {
		return fallback
	}
	return inst
}

// Counter makes an Int64Counter.
func (b *Builder) Counter(name, unit, desc string) metric.Int64Counter {
	c, err := b.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return made[metric.Int64Counter](b, c, err, noop.Int64Counter{})
}

// UpDown makes an Int64UpDownCounter.
func (b *Builder) UpDown(name, unit, desc string) metric.Int64UpDownCounter {
	c, err := b.m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return made[metric.Int64UpDownCounter](b, c, err, noop.Int64UpDownCounter{})
}

// Histogram makes a Float64Histogram of seconds with the given bucket
// boundaries.
func (b *Builder) Histogram(name string, bounds []float64, desc string) metric.Float64Histogram {
	h, err := b.m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(bounds...))
	return made[metric.Float64Histogram](b, h, err, noop.Float64Histogram{})
}

// Handle reports the errors of the instruments made so far, if any, to
// the global error handler (otel.Handle), as one error.
func (b *Builder) Handle() {
	if b.err != nil {
		otel.Handle(b.err)
	}
}
