package otelsaferetry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestEmptyBodyAttemptSpanCarriesDecision: an attempt answered without a
// body (a bare 503, whose body net/http makes http.NoBody) still carries
// the decision that followed it on its client span, as the package
// documentation says every attempt span does.
func TestEmptyBodyAttemptSpanCarriesDecision(t *testing.T) {
	r := newRig(t)
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // no body: Content-Length 0
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	rt := otelsaferetry.NewTransport(nil, r.options()...)
	if _, err := post(t, context.Background(), rt, s.URL); err != nil {
		t.Fatal(err)
	}
	var attempts int
	for _, sp := range r.spans.Ended() {
		if sp.Name() != http.MethodPost {
			continue
		}
		attempts++
		d, ok := attr(sp, otelsaferetry.AttributeDecision)
		if !ok {
			t.Errorf("attempt span %d has no %s: %v", attempts, otelsaferetry.AttributeDecision, sp.Attributes())
			continue
		}
		want := "return"
		if code, _ := attr(sp, "http.response.status_code"); code.AsInt64() == http.StatusServiceUnavailable {
			want = "retry"
			if _, ok := attr(sp, otelsaferetry.AttributeRetryWait); !ok {
				t.Errorf("retried attempt span has no %s", otelsaferetry.AttributeRetryWait)
			}
		}
		if d.AsString() != want {
			t.Errorf("attempt span decision %q, want %q", d.AsString(), want)
		}
		if _, ok := attr(sp, otelsaferetry.AttributeReason); !ok {
			t.Errorf("attempt span has no %s", otelsaferetry.AttributeReason)
		}
	}
	if attempts != 2 {
		t.Fatalf("%d attempt spans, want 2", attempts)
	}
}

// TestAttemptEventErrorTypeOfStatus: without attempt spans, the event of
// an attempt answered 400 or above carries error.type, the status, as the
// package documentation's attribute table says and as its client span
// would have.
func TestAttemptEventErrorTypeOfStatus(t *testing.T) {
	r := newRig(t)
	s := newScript(t, http.StatusServiceUnavailable, http.StatusCreated)
	rt := otelsaferetry.NewTransport(nil, r.options(otelsaferetry.WithAttemptSpans(false))...)
	if _, err := post(t, context.Background(), rt, s.URL); err != nil {
		t.Fatal(err)
	}
	var events int
	for _, sp := range r.spans.Ended() {
		for _, e := range sp.Events() {
			if e.Name != "saferetry.attempt" {
				continue
			}
			events++
			var status int64
			errType, hasErrType := "", false
			for _, kv := range e.Attributes {
				switch kv.Key {
				case "http.response.status_code":
					status = kv.Value.AsInt64()
				case "error.type":
					errType, hasErrType = kv.Value.AsString(), true
				}
			}
			switch {
			case status >= 400 && errType != "503":
				t.Errorf("event of a %d attempt: error.type %q (present %v), want \"503\"", status, errType, hasErrType)
			case status < 400 && hasErrType:
				t.Errorf("event of a %d attempt: error.type %q, want none", status, errType)
			}
		}
	}
	if events != 2 {
		t.Fatalf("%d attempt events, want 2", events)
	}
}

// TestNilURLIsAnError: a request without a URL is refused with ErrNotSent,
// as the saferetry Transport under the instrumentation refuses it, and
// the operation's span records the refusal; it does not panic.
func TestNilURLIsAnError(t *testing.T) {
	r := newRig(t)
	rt := otelsaferetry.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Error("the base was called")
		return nil, errors.New("called")
	}), r.options()...)
	req := &http.Request{Method: http.MethodPost, Header: http.Header{}}
	var resp *http.Response
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("RoundTrip panicked: %v", p)
			}
		}()
		resp, err = rt.RoundTrip(req)
	}()
	if resp != nil || !errors.Is(err, saferetry.ErrNotSent) {
		t.Fatalf("RoundTrip = %v, %v; want no response and ErrNotSent", resp, err)
	}
	ended := r.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want the operation's", len(ended))
	}
	if v, _ := attr(ended[0], "error.type"); v.AsString() != "saferetry.not_sent" {
		t.Errorf("operation span error.type %q, want saferetry.not_sent", v.AsString())
	}
}

// TestURLFullRedactsEncodedSignatureName: a signature parameter whose name
// is percent-encoded is the same parameter to the server, and its value is
// REDACTED from url.full as the package documentation says.
func TestURLFullRedactsEncodedSignatureName(t *testing.T) {
	r := newRig(t)
	rt := otelsaferetry.NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if got := req.URL.Query().Get("Signature"); got != "secret" {
			t.Errorf("the server sees Signature=%q, want secret", got)
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}), r.options()...)
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/v1/file?%53ignature=secret&a=1", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ended := r.spans.Ended()
	if len(ended) == 0 {
		t.Fatal("no span ended")
	}
	for _, sp := range ended {
		v, _ := attr(sp, "url.full")
		if strings.Contains(v.AsString(), "secret") {
			t.Errorf("span %q: url.full %q holds the signature", sp.Name(), v.AsString())
		}
	}
}

// TestURLFullKeepsTheQuery: redacting a signature parameter changes its
// value alone: url.full keeps the other parameters as sent, in their
// order, also one that Go's own query parser would drop (a ";" in it).
func TestURLFullKeepsTheQuery(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/v1/file?b=2&a=1;c=3&sig=secret&%53ignature=secret&z=%2F", nil)
	wantURLFull(t, req, "http://api.test/v1/file?b=2&a=1;c=3&sig=REDACTED&%53ignature=REDACTED&z=%2F")
}

// TestURLFullRedactsSignatureAfterSemicolon: url.full keeps a parameter
// with a ";" as sent, and a server that splits the query at ";" as well as
// at "&" (Rack 2, Python before 3.9.2, the W3C's old recommendation) sees
// a signature parameter after the ";": its value is REDACTED too, as Go's
// parser, which drops the whole parameter, used to leave no trace of it.
func TestURLFullRedactsSignatureAfterSemicolon(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"a=1;sig=secret", "a=1;sig=REDACTED"},
		{"a=1;%73ig=secret&b=2", "a=1;%73ig=REDACTED&b=2"},
		{"Signature=secret;a=1", "Signature=REDACTED;a=1"},
		{"b=2&x;X-Goog-Signature=secret;AWSAccessKeyId=secret&c=3", "b=2&x;X-Goog-Signature=REDACTED;AWSAccessKeyId=REDACTED&c=3"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/v1/file?"+tc.query, nil)
			wantURLFull(t, req, "http://api.test/v1/file?"+tc.want)
		})
	}
}

// TestURLFullRedactsOpaqueCredentials: a request whose URL carries its
// authority in Opaque ("//user:password@host/path", which net/http sends
// as the request target) has its credentials REDACTED from url.full as
// a URL's User is; an opaque part without credentials is kept as sent.
func TestURLFullRedactsOpaqueCredentials(t *testing.T) {
	for _, tc := range []struct{ opaque, want string }{
		{"//alice:hunter2@api.test/v1/file", "http://REDACTED:REDACTED@api.test/v1/file"},
		{"//alice@api.test/v1/file", "http://REDACTED:REDACTED@api.test/v1/file"},
		{"//a%40b:hunter2@api.test", "http://REDACTED:REDACTED@api.test"},
		{"//api.test/v1/a@b", "http://api.test/v1/a@b"},
		{"//api.test?e=a@b", "http://api.test?e=a@b"},
		{"//api.test#a@b", "http://api.test#a@b"},
		{"/v1/file", "http:/v1/file"},
	} {
		t.Run(tc.opaque, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.URL.Opaque = tc.opaque
			wantURLFull(t, req, tc.want)
		})
	}
}

// wantURLFull sends req through an instrumented Transport over a base that
// answers 200 and checks that both spans (operation and attempt) carry
// want as url.full.
func wantURLFull(t *testing.T, req *http.Request, want string) {
	t.Helper()
	r := newRig(t)
	rt := otelsaferetry.NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}), r.options()...)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ended := r.spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	for _, sp := range ended {
		if v, _ := attr(sp, "url.full"); v.AsString() != want {
			t.Errorf("span %q: url.full %q, want %q", sp.Name(), v.AsString(), want)
		}
	}
}
