package otelidempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

// The three parts on one Middleware, read back with the SDK's manual
// reader: a payment sent twice with one key is executed once and replayed
// once.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	inst := otelidempotency.New(otelidempotency.WithMeterProvider(mp))

	store := memstore.New()
	defer store.Close()
	mw := idempotency.Middleware(inst.WrapStore(store, "memory"), idempotency.WithHook(inst.Hook()))
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw(inst.Handler(pay)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":10}`))
		req.Header.Set("Idempotency-Key", "order-1")
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelidempotency.MetricRequests {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				o, _ := dp.Attributes.Value("saferetry.outcome")
				route, _ := dp.Attributes.Value("http.route")
				fmt.Println(o.AsString(), route.AsString(), dp.Value)
			}
		}
	}
	// Unordered output:
	// new /payments 1
	// replay /payments 1
}
