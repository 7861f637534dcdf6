package otelidempotency_test

import (
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

// TestHookPutsOutcomeOnSpan: the request's span (made outside the
// Middleware, as otelhttp would) gets saferetry.outcome.
func TestHookPutsOutcomeOnSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("test")
	in := otelidempotency.New(otelidempotency.WithMeterProvider(newMeter(t).provider))
	inner := serve(in, newStore(t), app{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracer.Start(r.Context(), "POST /payments")
		defer span.End()
		inner.ServeHTTP(w, r.WithContext(ctx))
	})
	expect(t, post(h, "span-1", body), 201)
	expect(t, post(h, "span-1", body), 201)
	expect(t, post(h, "a,b", body), 400)
	var got []string
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == attribute.Key("saferetry.outcome") {
				got = append(got, kv.Value.AsString())
			}
		}
	}
	want := []string{string(idempotency.OutcomeNew), string(idempotency.OutcomeReplay), string(idempotency.OutcomeMalformedKey)}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("span outcomes %v, want %v", got, want)
	}
}
