package otelsaferetry_test

import (
	"context"
	"net/http"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// freshBase answers every request with a new 201, in memory, so that a
// benchmark over it measures only what wraps it.
type freshBase struct{}

func (freshBase) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 201, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// BenchmarkInstrumentation is the cost of one logical POST that succeeds
// at once: off is the saferetry Transport alone (as BenchmarkOverhead's
// "transport" in the root package); noop is the instrumented Transport on
// no-op providers (its layers and hook, recording nothing); on is the
// instrumented Transport on SDK providers (two spans sampled and ended, no
// exporter; six instruments aggregated by a manual reader).
func BenchmarkInstrumentation(b *testing.B) {
	b.Run("off", func(b *testing.B) { testkit.BenchPOST(b, saferetry.NewTransport(freshBase{})) })
	b.Run("noop", func(b *testing.B) {
		testkit.BenchPOST(b, otelsaferetry.NewTransport(freshBase{},
			otelsaferetry.WithTracerProvider(tracenoop.NewTracerProvider()),
			otelsaferetry.WithMeterProvider(metricnoop.NewMeterProvider())))
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer func() {
			_ = tp.Shutdown(context.Background())
			_ = mp.Shutdown(context.Background())
		}()
		testkit.BenchPOST(b, otelsaferetry.NewTransport(freshBase{},
			otelsaferetry.WithTracerProvider(tp), otelsaferetry.WithMeterProvider(mp)))
	})
}
