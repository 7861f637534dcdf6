package otelsaferetry_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestGlobalPropagatorSetLater: a Transport made before the program sets
// the global propagator (a package-level client, say) still propagates
// once it is set.
func TestGlobalPropagatorSetLater(t *testing.T) {
	r := newRig(t)
	rt := otelsaferetry.NewTransport(nil, otelsaferetry.WithTracerProvider(r.tp), otelsaferetry.WithMeterProvider(r.mp))
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	s := newScript(t, http.StatusCreated)
	if _, err := post(t, context.Background(), rt, s.URL); err != nil {
		t.Fatal(err)
	}
	if tps, _ := s.seen(); len(tps) != 1 || tps[0] == "" {
		t.Fatalf("traceparents seen %q, want one", tps)
	}
}

// TestEmptyBodyEndsSpans: a response without a body (HEAD, 204) ends the
// attempt and operation spans at once, even if the caller never closes it,
// and the body stays http.NoBody.
func TestEmptyBodyEndsSpans(t *testing.T) {
	r := newRig(t)
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	rt := otelsaferetry.NewTransport(base, r.options()...)
	req, _ := http.NewRequest(http.MethodHead, "http://api.test/v1/debits", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != http.NoBody {
		t.Errorf("body %T, want http.NoBody", resp.Body)
	}
	if n := len(r.spans.Ended()); n != 2 {
		t.Fatalf("%d spans ended before the body was closed, want the operation's and the attempt's", n)
	}
}

// TestUnknownMethodNotAMetricSeries: a method the conventions do not know
// is _OTHER on metrics, and its name only on the spans.
func TestUnknownMethodNotAMetricSeries(t *testing.T) {
	r := newRig(t)
	s := newScript(t, http.StatusOK)
	rt := otelsaferetry.NewTransport(nil, r.options()...)
	req, _ := http.NewRequest("FROBNICATE", s.URL, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for name, agg := range r.collect(t) {
		for _, set := range attributeSets(agg) {
			if _, ok := set.Value("http.request.method_original"); ok {
				t.Errorf("%s carries http.request.method_original", name)
			}
		}
	}
	var spans int
	for _, sp := range r.spans.Ended() {
		if v, ok := attr(sp, "http.request.method_original"); ok && v.AsString() == "FROBNICATE" {
			spans++
		}
	}
	if spans != 2 {
		t.Errorf("%d spans carry the original method, want 2", spans)
	}
}
