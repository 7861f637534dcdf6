package otelsaferetry_test

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// memBase answers attempt n (from 0) with answer(n, req), counting the
// closes of the bodies it hands out and keeping the requests it got.
type memBase struct {
	answer func(n int, req *http.Request) (*http.Response, error)
	mu     sync.Mutex
	reqs   []*http.Request
	closes int
}

func (b *memBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	n := len(b.reqs)
	b.reqs = append(b.reqs, r)
	b.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return b.answer(n, r)
}

// status is a response with a body that counts its closes in b.
func (b *memBase) status(code int, r *http.Request) *http.Response {
	body := closeCounter{Reader: strings.NewReader("body"), mu: &b.mu, closes: &b.closes}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: body, Request: r}
}

func (b *memBase) closed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// trackedBody is a request body that records its Close.
type trackedBody struct {
	io.Reader
	closed bool
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

func newRequest(t *testing.T) (*http.Request, *trackedBody) {
	t.Helper()
	body := &trackedBody{Reader: strings.NewReader("debit 1500")}
	req, err := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Caller", "1")
	return req, body
}

// TestRoundTripperContract checks the RoundTripper contract with the
// instrumentation on: the caller's request is not modified, its body is
// closed, intermediate response bodies are closed, a response comes with a
// nil error (a final 500 too) and an error without a response, a writable
// body stays writable, and the spans end with the final body.
func TestRoundTripperContract(t *testing.T) {
	t.Run("request untouched, bodies closed, spans end with the body", func(t *testing.T) {
		r := newRig(t)
		base := &memBase{}
		base.answer = func(n int, req *http.Request) (*http.Response, error) {
			return base.status([]int{503, 503, 500}[n], req), nil
		}
		rt := otelsaferetry.NewTransport(base, r.options(otelsaferetry.WithRetryOptions(saferetry.WithMaxAttempts(3)))...)
		req, body := newRequest(t)
		ctx := req.Context()
		resp, err := rt.RoundTrip(req)
		if err != nil || resp == nil || resp.StatusCode != 500 {
			t.Fatalf("RoundTrip: %v, %v; want the final 500 with a nil error", resp, err)
		}
		if want := (http.Header{"X-Caller": {"1"}}); !reflect.DeepEqual(req.Header, want) || req.Context() != ctx {
			t.Errorf("the caller's request changed: header %v", req.Header)
		}
		if !body.closed {
			t.Error("the request body is not closed")
		}
		for i, sent := range base.reqs {
			if sent.Header.Get("Traceparent") == "" || sent.Header.Get(saferetry.HeaderIdempotencyKey) == "" {
				t.Errorf("attempt %d went without trace context or key: %v", i+1, sent.Header)
			}
		}
		if n := base.closed(); n != 2 {
			t.Errorf("%d response bodies closed before the final one, want 2", n)
		}
		if n := len(r.spans.Ended()); n != 2 {
			t.Errorf("%d spans ended before the final body is closed, want the 2 intermediate attempts", n)
		}
		resp.Body.Close()
		if n := len(r.spans.Ended()); n != 4 {
			t.Errorf("%d spans ended after the final body is closed, want 4", n)
		}
	})
	t.Run("errors come without a response", func(t *testing.T) {
		for name, answer := range map[string]func(n int, req *http.Request) (*http.Response, error){
			"transport error": func(int, *http.Request) (*http.Response, error) { return nil, io.ErrUnexpectedEOF },
			"response and error": func(_ int, req *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("x")), Request: req}, io.ErrUnexpectedEOF
			},
			"neither": func(int, *http.Request) (*http.Response, error) { return nil, nil },
		} {
			t.Run(name, func(t *testing.T) { checkErrorPath(t, answer) })
		}
	})
	t.Run("a writable body stays writable", func(t *testing.T) {
		r := newRig(t)
		rwc := struct {
			io.Reader
			io.Writer
			io.Closer
		}{strings.NewReader(""), io.Discard, io.NopCloser(nil)}
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{}, Body: rwc, Request: req}, nil
		})
		req, _ := newRequest(t)
		resp, err := otelsaferetry.NewTransport(base, r.options()...).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := resp.Body.(io.Writer); !ok {
			t.Errorf("the 101 response body %T is no longer an io.Writer", resp.Body)
		}
		resp.Body.Close()
	})
}

// checkErrorPath runs two attempts that both get answer and checks that
// the error comes alone, the bodies are closed, and every span ended,
// marked as an error.
func checkErrorPath(t *testing.T, answer func(int, *http.Request) (*http.Response, error)) {
	r := newRig(t)
	rt := otelsaferetry.NewTransport(&memBase{answer: answer},
		r.options(otelsaferetry.WithRetryOptions(saferetry.WithMaxAttempts(2)))...)
	req, body := newRequest(t)
	resp, err := rt.RoundTrip(req)
	var e *saferetry.Error
	if resp != nil || !errors.As(err, &e) || e.Attempts != 2 {
		t.Fatalf("RoundTrip: %v, %v; want no response and a *saferetry.Error after 2 attempts", resp, err)
	}
	if !body.closed {
		t.Error("the request body is not closed")
	}
	spans := r.spans.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3 (the operation and 2 attempts)", len(spans))
	}
	for _, s := range spans {
		if s.Status().Code != codes.Error {
			t.Errorf("span %s: status %v, want an error", s.Name(), s.Status())
		}
		if _, ok := attr(s, semconv.ErrorTypeKey); !ok {
			t.Errorf("span %s has no error.type", s.Name())
		}
		if _, ok := attr(s, otelsaferetry.AttributeDecision); s.SpanKind() == trace.SpanKindClient && !ok {
			t.Errorf("attempt span %s ended before the hook wrote the decision", s.Name())
		}
	}
}
