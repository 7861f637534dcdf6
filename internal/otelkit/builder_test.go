package otelkit

import (
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// failingMeter makes no instrument: each constructor answers nil and an
// error, as a provider may.
type failingMeter struct{ noop.Meter }

var errRefused = errors.New("refused")

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errRefused
}

func (failingMeter) Int64UpDownCounter(string, ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	return nil, errRefused
}

func (failingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errRefused
}

type handlerFunc func(error)

func (f handlerFunc) Handle(err error) { f(err) }

// handled collects what reaches the global error handler during the test.
func handled(t *testing.T) *[]error {
	var got []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(handlerFunc(func(err error) { got = append(got, err) }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return &got
}

// TestBuilderFallsBackAndReports: an instrument the provider cannot make is
// a no-op one, and Handle reports each error, prefixed, as one error.
func TestBuilderFallsBackAndReports(t *testing.T) {
	got := handled(t)
	b := NewBuilder(failingMeter{}, "otelkit_test:")
	if c := b.Counter("c", "1", "a counter"); c == nil {
		t.Error("Counter = nil, want a no-op counter")
	}
	if u := b.UpDown("u", "1", "an updowncounter"); u == nil {
		t.Error("UpDown = nil, want a no-op updowncounter")
	}
	if h := b.Histogram("h", []float64{1}, "a histogram"); h == nil {
		t.Error("Histogram = nil, want a no-op histogram")
	}
	b.Handle()
	if len(*got) != 1 {
		t.Fatalf("Handle reported %d errors, want 1: %v", len(*got), *got)
	}
	if err := (*got)[0]; strings.Count(err.Error(), "otelkit_test: refused") != 3 || !errors.Is(err, errRefused) {
		t.Errorf("Handle reported %q, want the three errors prefixed, matching errRefused", err)
	}
}

// TestBuilderKeepsInstruments: the instruments a provider makes are
// returned as made, and Handle reports nothing.
func TestBuilderKeepsInstruments(t *testing.T) {
	got := handled(t)
	b := NewBuilder(sdkmetric.NewMeterProvider().Meter("otelkit_test"), "otelkit_test:")
	if _, isNoop := b.Counter("c", "1", "a counter").(noop.Int64Counter); isNoop {
		t.Error("Counter is a no-op, not the provider's")
	}
	if _, isNoop := b.UpDown("u", "1", "an updowncounter").(noop.Int64UpDownCounter); isNoop {
		t.Error("UpDown is a no-op, not the provider's")
	}
	if _, isNoop := b.Histogram("h", []float64{1}, "a histogram").(noop.Float64Histogram); isNoop {
		t.Error("Histogram is a no-op, not the provider's")
	}
	b.Handle()
	if len(*got) != 0 {
		t.Errorf("Handle reported %v, want nothing", *got)
	}
}
