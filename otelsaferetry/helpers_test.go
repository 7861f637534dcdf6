package otelsaferetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// rig is an SDK tracer provider recording every span in memory and an SDK
// meter provider read by a manual reader.
type rig struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newRig(t testing.TB) *rig {
	r := &rig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = r.mp.Shutdown(context.Background())
	})
	return r
}

// options are the providers, W3C trace-context propagation and a 1 ms
// constant backoff, then opts.
func (r *rig) options(opts ...otelsaferetry.Option) []otelsaferetry.Option {
	return append([]otelsaferetry.Option{
		otelsaferetry.WithTracerProvider(r.tp),
		otelsaferetry.WithMeterProvider(r.mp),
		otelsaferetry.WithPropagators(propagation.TraceContext{}),
		otelsaferetry.WithRetryOptions(saferetry.WithBackoff(func() backoff.BackOff {
			return backoff.NewConstantBackOff(time.Millisecond)
		})),
	}, opts...)
}

// collect reads the metrics, by instrument name.
func (r *rig) collect(t testing.TB) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum adds up the counter's data points that carry every attribute of want.
func sum(t testing.TB, ms map[string]metricdata.Aggregation, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	agg, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := agg.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, not an int64 sum", name, agg)
	}
	var n int64
	for _, dp := range s.DataPoints {
		if hasAll(dp.Attributes, want) {
			n += dp.Value
		}
	}
	return n
}

// histogram gives the count and the sum of the histogram's data points
// that carry every attribute of want.
func histogram(t testing.TB, ms map[string]metricdata.Aggregation, name string, want ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	agg, ok := ms[name]
	if !ok {
		return 0, 0
	}
	h, ok := agg.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, not a float64 histogram", name, agg)
	}
	var n uint64
	var s float64
	for _, dp := range h.DataPoints {
		if hasAll(dp.Attributes, want) {
			n, s = n+dp.Count, s+dp.Sum
		}
	}
	return n, s
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// attr returns the span's attribute k, and whether it has it.
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// script is a server answering its attempts with the statuses given, the
// last one over again, and keeping what each attempt carried.
type script struct {
	*httptest.Server
	mu          sync.Mutex
	statuses    []int
	traceparent []string
	keys        []string
}

func newScript(t testing.TB, statuses ...int) *script {
	s := &script{statuses: statuses}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		n := len(s.keys)
		s.traceparent = append(s.traceparent, r.Header.Get("Traceparent"))
		s.keys = append(s.keys, r.Header.Get(saferetry.HeaderIdempotencyKey))
		s.mu.Unlock()
		status := s.statuses[min(n, len(s.statuses)-1)]
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "attempt %d", n+1)
	}))
	t.Cleanup(s.Close)
	return s
}

// seen returns the trace parents and keys the server saw.
func (s *script) seen() (traceparents, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.traceparent...), append([]string(nil), s.keys...)
}

// roundTripFunc is a RoundTripper in a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeCounter is a body that counts its closes.
type closeCounter struct {
	io.Reader
	mu     *sync.Mutex
	closes *int
}

func (c closeCounter) Close() error {
	c.mu.Lock()
	*c.closes++
	c.mu.Unlock()
	return nil
}

// post sends a POST with a small body through rt and reads and closes the
// response body; it returns the status, or the error.
func post(t testing.TB, ctx context.Context, rt http.RoundTripper, url string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"amount":1500}`))
	if err != nil {
		t.Error(err) // post may run in a goroutine of the test's
		return 0, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		if resp != nil {
			t.Errorf("RoundTrip returned a response with the error %v", err)
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
