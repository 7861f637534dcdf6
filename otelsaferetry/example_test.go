package otelsaferetry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

func ExampleNewTransport() {
	// A server that answers the first attempt with 503, then 201.
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	// In a program, exporters; here, spans in memory and a manual reader.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	rt := otelsaferetry.NewTransport(nil,
		otelsaferetry.WithTracerProvider(tp),
		otelsaferetry.WithMeterProvider(mp),
		otelsaferetry.WithRetryOptions(saferetry.WithBackoff(func() backoff.BackOff {
			return backoff.NewConstantBackOff(time.Millisecond)
		})))
	client := &http.Client{Transport: rt}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"amount":1500}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close() // ends the spans
	fmt.Println("status:", resp.StatusCode)

	for _, s := range spans.Ended() {
		fmt.Print("span: ", s.Name(), " (", s.SpanKind(), ")")
		for _, kv := range s.Attributes() {
			if kv.Key == semconv.HTTPRequestResendCountKey {
				fmt.Print(" resend_count=", kv.Value.AsInt64())
			}
		}
		fmt.Println()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					counts[m.Name] += dp.Value
				}
			}
		}
	}
	for _, name := range []string{otelsaferetry.MetricAttempts, otelsaferetry.MetricRetries, otelsaferetry.MetricGaveUp} {
		fmt.Println(name, counts[name])
	}
	// Output:
	// status: 201
	// span: POST (client)
	// span: POST (client) resend_count=1
	// span: saferetry POST (internal)
	// saferetry.client.attempts 2
	// saferetry.client.retries 1
	// saferetry.client.operation.gave_up 0
}
