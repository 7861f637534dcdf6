package mockcmd

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
	"github.com/saferetry/saferetry/mockserver"
)

// metrics is what -metrics adds: the otelidempotency instruments, read by
// the OpenTelemetry Prometheus exporter into a registry of their own, whose
// text /metrics serves.
type metrics struct {
	inst     *otelidempotency.Instrumentation
	handler  http.Handler
	provider *sdkmetric.MeterProvider
}

// newMetrics makes the instruments of a server whose keys are all in
// namespace's scope: saferetry.server.retries is counted per scope, and the
// server has one, so its label is the namespace.
func newMetrics(namespace string) (*metrics, error) {
	reg := prometheus.NewRegistry()
	// One instrumentation scope: its name on every series says nothing.
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("mockserver: -metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	inst := otelidempotency.New(otelidempotency.WithMeterProvider(mp),
		otelidempotency.WithRetriesByScope(func(string) string { return namespace }))
	return &metrics{
		inst:     inst,
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		provider: mp,
	}, nil
}

// options instruments the server over store, named storeName, and serves
// the text at /metrics.
func (m *metrics) options(store idempotency.Store, storeName string) []mockserver.Option {
	return []mockserver.Option{
		mockserver.WithStore(m.inst.WrapStore(store, storeName)),
		mockserver.WithIdempotencyOptions(idempotency.WithHook(m.inst.Hook())),
		mockserver.WithHandlerMiddleware(m.inst.Handler),
		mockserver.WithMetricsHandler(m.handler),
	}
}

// close stops the provider once the server is closed.
func (m *metrics) close() { _ = m.provider.Shutdown(context.Background()) }
