package otelidempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

// TestRouteOfHostPattern: a ServeMux pattern with a host
// ("POST api.example.com/payments/{id}") gives http.route its path
// template only, "/payments/{id}", the value otelhttp gives the same
// request: the conventions' http.route is the path template, and a
// dashboard joins the two packages' series on it.
func TestRouteOfHostPattern(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	mw := idempotency.Middleware(in.WrapStore(newStore(t), "test"), idempotency.WithHook(in.Hook()))
	mux := http.NewServeMux()
	mux.Handle("POST api.example.com/payments/{id}", mw(in.Handler(app{})))
	h := otelhttp.NewHandler(mux, "server", otelhttp.WithMeterProvider(m.provider))

	r := httptest.NewRequest(http.MethodPost, "http://api.example.com/payments/p-1", strings.NewReader(body))
	r.Header.Set(idempotency.HeaderIdempotencyKey, "route-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	expect(t, w, 201)

	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	routes := map[string]string{} // instrument: its http.route
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			var sets []attribute.Set
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, s := range sets {
				if v, ok := s.Value("http.route"); ok {
					routes[mt.Name] = v.AsString()
				}
			}
		}
	}
	const want = "/payments/{id}"
	if got := routes["http.server.request.duration"]; got != want {
		t.Fatalf("otelhttp's http.route = %q, want %q (the test's premise)", got, want)
	}
	for _, name := range []string{otelidempotency.MetricRequests, otelidempotency.MetricRequestDuration,
		otelidempotency.MetricHandlerDuration, otelidempotency.MetricClaimsActive} {
		if got := routes[name]; got != want {
			t.Errorf("%s: http.route = %q, want %q, as otelhttp's", name, got, want)
		}
	}
}
