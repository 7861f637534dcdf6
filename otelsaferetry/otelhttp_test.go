package otelsaferetry_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestOtelhttpBase puts otelhttp under the Transport: each attempt is one
// client span (otelhttp's, under the operation span) and one
// http.client.request.duration measurement, never two; the operation span
// has an event per attempt with its resend count. A base that wraps
// otelhttp needs WithAttemptSpans(false); without it, each attempt has two
// client spans, which is why the option exists. otelhttp ends the span of
// a retried answer when the Transport's drain of it ends, which may be
// after RoundTrip returned (a drain is waited for a few milliseconds at
// most): as on a loaded machine, where it failed, "slow drains" makes those
// drains last longer than that.
func TestOtelhttpBase(t *testing.T) {
	cases := []struct {
		name        string
		wrap        bool // hide otelhttp under a RoundTripper of our own
		slow        bool // the bodies of the answers retried are read slowly
		opts        []otelsaferetry.Option
		clientSpans int
	}{
		{name: "otelhttp", clientSpans: 3},
		{name: "otelhttp, slow drains", slow: true, clientSpans: 3},
		{name: "wrapped, WithAttemptSpans(false)", wrap: true,
			opts: []otelsaferetry.Option{otelsaferetry.WithAttemptSpans(false)}, clientSpans: 3},
		{name: "wrapped, not told", wrap: true, clientSpans: 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			srv := newScript(t, 503, 503, 201)
			var wire http.RoundTripper = http.DefaultTransport
			if c.slow {
				wire = roundTripFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := http.DefaultTransport.RoundTrip(r)
					if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
						resp.Body = slowBody{resp.Body}
					}
					return resp, err
				})
			}
			var base http.RoundTripper = otelhttp.NewTransport(wire,
				otelhttp.WithTracerProvider(r.tp), otelhttp.WithMeterProvider(r.mp),
				otelhttp.WithPropagators(propagation.TraceContext{}))
			if c.wrap {
				inner := base
				base = roundTripFunc(func(r *http.Request) (*http.Response, error) { return inner.RoundTrip(r) })
			}
			rt := otelsaferetry.NewTransport(base, r.options(c.opts...)...)
			if status, err := post(t, context.Background(), rt, srv.URL); err != nil || status != 201 {
				t.Fatalf("got %d, %v; want 201", status, err)
			}
			ended := endedClientSpans(r, c.clientSpans)
			var op trace.SpanContext
			clients := 0
			for _, s := range ended {
				switch s.SpanKind() {
				case trace.SpanKindInternal:
					op = s.SpanContext()
					checkEvents(t, s.Events(), c.clientSpans == 3)
				case trace.SpanKindClient:
					clients++
				}
			}
			if clients != c.clientSpans {
				t.Errorf("%d client spans, want %d", clients, c.clientSpans)
			}
			for _, s := range ended {
				if c.clientSpans == 3 && s.InstrumentationScope().Name == otelhttp.ScopeName && s.Parent().SpanID() != op.SpanID() {
					t.Errorf("otelhttp span %s is under %v, not under the operation span", s.Name(), s.Parent().SpanID())
				}
			}
			ms := r.collect(t)
			if n, _ := histogram(t, ms, "http.client.request.duration"); n != 3 {
				t.Errorf("http.client.request.duration: %d requests, want 3", n)
			}
			if got := sum(t, ms, otelsaferetry.MetricAttempts); got != 3 {
				t.Errorf("%s = %d, want 3", otelsaferetry.MetricAttempts, got)
			}
		})
	}
}

// endedClientSpans returns the spans r recorded as ended once want client
// spans are among them, or once a few seconds passed. otelhttp ends a
// span, and records its http.client.request.duration, when the body of
// its answer is read to its end or closed: for an answer retried, by the
// Transport's drain, which RoundTrip waits for a few milliseconds at most.
func endedClientSpans(r *rig, want int) []sdktrace.ReadOnlySpan {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ended, clients := r.spans.Ended(), 0
		for _, s := range ended {
			if s.SpanKind() == trace.SpanKindClient {
				clients++
			}
		}
		if clients >= want || time.Now().After(deadline) {
			return ended
		}
		time.Sleep(time.Millisecond)
	}
}

// slowBody is a body each read of which takes 20 ms more.
type slowBody struct{ io.ReadCloser }

func (b slowBody) Read(p []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return b.ReadCloser.Read(p)
}

// checkEvents checks the attempt events of an operation span: present
// only when the Transport makes no attempt spans, one per attempt.
func checkEvents(t *testing.T, events []sdktrace.Event, want bool) {
	t.Helper()
	if !want {
		if len(events) != 0 {
			t.Errorf("%d attempt events next to attempt spans, want none", len(events))
		}
		return
	}
	if len(events) != 3 {
		t.Fatalf("%d attempt events, want 3", len(events))
	}
	for i, e := range events {
		var resend, status int64 = -1, -1
		for _, kv := range e.Attributes {
			switch kv.Key {
			case semconv.HTTPRequestResendCountKey:
				resend = kv.Value.AsInt64()
			case semconv.HTTPResponseStatusCodeKey:
				status = kv.Value.AsInt64()
			}
		}
		wantStatus := []int64{503, 503, 201}[i]
		if e.Name != "saferetry.attempt" || resend != int64(i) || status != wantStatus {
			t.Errorf("event %d: %s resend_count %d status %d, want saferetry.attempt %d %d",
				i, e.Name, resend, status, i, wantStatus)
		}
	}
}
