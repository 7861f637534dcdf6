package otelsaferetry_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestPanicEndsSpans: a panic that goes through RoundTrip (from the base,
// or from a hook, classifier or logger of the caller's) returns no
// response whose body would end the spans: the operation span and the
// attempt span under way end all the same, marked as errors, and the
// panic goes on to the caller as it was.
func TestPanicEndsSpans(t *testing.T) {
	for _, tc := range []struct {
		name string
		base http.RoundTripper
		opts []otelsaferetry.Option
	}{
		{name: "base panics on the second attempt", base: func() http.RoundTripper {
			n := 0
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if n++; n == 2 {
					panic("base")
				}
				return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			})
		}()},
		{name: "hook panics", base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{},
				Body: closeCounter{Reader: strings.NewReader("ok"), mu: new(sync.Mutex), closes: new(int)}, Request: req}, nil
		}), opts: []otelsaferetry.Option{otelsaferetry.WithRetryOptions(saferetry.WithHook(func(saferetry.Attempt) { panic("hook") }))}},
		{name: "classifier panics", base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 201, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
		}), opts: []otelsaferetry.Option{otelsaferetry.WithRetryOptions(saferetry.WithClassifier(func(*http.Request, *http.Response, error) saferetry.Decision {
			panic("classifier")
		}))}},
		{name: "propagator panics", base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		}), opts: []otelsaferetry.Option{otelsaferetry.WithPropagators(panickyPropagator{propagation.TraceContext{}})}},
		// The logger runs after every hook, the instrumentation's too,
		// which has by then handed the attempt span's end to the body.
		{name: "logger panics after a retried attempt", base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("busy")), Request: req}, nil
		}), opts: []otelsaferetry.Option{otelsaferetry.WithRetryOptions(saferetry.WithLogger(slog.New(panickyHandler{})))}},
		// A retried answer that is no error (a 202 the caller's
		// classifier polls again): its span must not end as if all went
		// well when the panic closes its body.
		{name: "logger panics after a retried 2xx", base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 202, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("pending")), Request: req}, nil
		}), opts: []otelsaferetry.Option{otelsaferetry.WithRetryOptions(saferetry.WithClassifier(retry202),
			saferetry.WithLogger(slog.New(panickyHandler{})))}},
		{name: "logger panics after the last attempt", base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 201, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
		}), opts: []otelsaferetry.Option{otelsaferetry.WithRetryOptions(saferetry.WithLogger(slog.New(panickyHandler{})))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			rt := otelsaferetry.NewTransport(tc.base, r.options(tc.opts...)...)
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", strings.NewReader(`{}`))
				_, _ = rt.RoundTrip(req)
			}()
			if recovered == nil {
				t.Fatal("the panic did not reach the caller")
			}
			started, ended := len(r.spans.Started()), len(r.spans.Ended())
			if started == 0 || ended != started {
				t.Fatalf("%d spans started, %d ended after the panic; want all ended", started, ended)
			}
			// Every span, the attempts' too: the saferetry Transport
			// closes the answer it holds as the panic goes through it,
			// which must not end the attempt's span as if all went well.
			for _, s := range r.spans.Ended() {
				if s.Status().Code != codes.Error {
					t.Errorf("%v span %s status %v after a panic, want Error", s.SpanKind(), s.Name(), s.Status())
				}
			}
		})
	}
}

// retry202 is a classifier that retries a 202 Accepted, as a caller
// polling for an operation's end may.
func retry202(_ *http.Request, resp *http.Response, _ error) saferetry.Decision {
	if resp != nil && resp.StatusCode == http.StatusAccepted {
		return saferetry.DecisionRetry
	}
	return saferetry.DecisionDefault
}

// panickyHandler is a slog handler of the caller's whose Handle panics.
type panickyHandler struct{ slog.Handler }

func (panickyHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panickyHandler) Handle(context.Context, slog.Record) error { panic("logger") }

// panickyPropagator is a propagator of the caller's whose Inject panics.
type panickyPropagator struct{ propagation.TextMapPropagator }

func (panickyPropagator) Inject(context.Context, propagation.TextMapCarrier) { panic("propagator") }
