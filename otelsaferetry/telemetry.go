package otelsaferetry

import (
	"net/http"
	"reflect"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is what the instrumentation's three parts share (the operation
// layer, the attempt layer and the hook); it is read-only once built.
type telemetry struct {
	tracer       trace.Tracer
	propagators  propagation.TextMapPropagator
	ins          *instruments
	keyAttribute bool
	attemptSpans bool
}

func newTelemetry(cfg *config, base http.RoundTripper) *telemetry {
	spans := !makesClientSpans(base)
	if cfg.attemptSpans != nil {
		spans = *cfg.attemptSpans
	}
	return &telemetry{
		tracer:       cfg.tracerProvider.Tracer(ScopeName),
		propagators:  cfg.propagators,
		ins:          newInstruments(cfg.meterProvider),
		keyAttribute: cfg.keyAttribute,
		attemptSpans: spans,
	}
}

// attemptBase is what carries the attempts: base itself, or base under the
// attempt layer when the Transport makes the attempt spans.
func (tel *telemetry) attemptBase(base http.RoundTripper) http.RoundTripper {
	if !tel.attemptSpans {
		return base
	}
	return &attemptLayer{tel: tel, base: base}
}

const otelhttpPath = "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

// makesClientSpans reports whether rt is an *otelhttp.Transport, which
// starts a client span per request. The type is recognised by its name, so
// that this package does not depend on otelhttp's module.
func makesClientSpans(rt http.RoundTripper) bool {
	t := reflect.TypeOf(rt)
	return t != nil && t.Kind() == reflect.Pointer &&
		t.Elem().PkgPath() == otelhttpPath && t.Elem().Name() == "Transport"
}
