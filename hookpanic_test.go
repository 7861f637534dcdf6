package saferetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestPanickingHookLetsGo: a hook, logger or classifier that panics sends
// the panic on to the caller, as it was, and the Transport lets go of what
// the attempt held first: the answer's body is closed (its connection is not held
// forever by a caller that recovers, as net/http's server does for a
// handler), and the retry that was planned, never made, is not paid from
// the budget the Transport's other operations share.
func TestPanickingHookLetsGo(t *testing.T) {
	hook := WithHook(func(Attempt) { panic("hook") })
	logger := WithLogger(slog.New(panickyHandler{}))
	classifier := WithClassifier(func(*http.Request, *http.Response, error) Decision { panic("classifier") })
	tests := []struct {
		name   string
		opt    Option
		status int
	}{
		{"hook, retried answer", hook, http.StatusServiceUnavailable},
		{"hook, final answer", hook, http.StatusCreated},
		{"logger, retried answer", logger, http.StatusServiceUnavailable},
		{"logger, final answer", logger, http.StatusCreated},
		{"classifier, retryable answer", classifier, http.StatusServiceUnavailable},
		{"classifier, final answer", classifier, http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(tt.status), testkit.Status(http.StatusCreated))
			tr, _, _ := testTransport(rc, tt.opt, WithRetryBudget(100, 5))
			testkit.WantPanic(t, "", func() {
				resp, _ := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, `{"amount":1}`))
				closeResp(resp)
			})
			wantLetGo(t, rc, tr)
		})
	}
}

// panickyHandler is a slog handler that panics on every record.
type panickyHandler struct{ slog.Handler }

// wantLetGo checks what a panic through one attempt must leave behind:
// the attempt's answer closed, and the Transport's budget (100 tokens) full
// again, the planned retry's cost given back.
func wantLetGo(t *testing.T, rc *testkit.Recorder, tr *Transport) {
	t.Helper()
	bodies := rc.Bodies()
	if len(bodies) != 1 {
		t.Fatalf("%d attempts, want 1", len(bodies))
	}
	if !bodies[0].Closed() {
		t.Error("the answer's body was left open")
	}
	if n := tr.policy.Budget.Available(); n != 100 {
		t.Errorf("budget = %d after the panic, want 100", n)
	}
}

func (panickyHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panickyHandler) Handle(context.Context, slog.Record) error { panic("logger") }

// TestPanickingCallerCodeLetsGo: the caller's code that the Transport runs
// while an attempt's answer is open, with no hook, logger or classifier set
// (so that nothing else guards it), lets go as a hook does when it panics
// (see TestPanickingHookLetsGo): the backoff factory or schedule (run when
// a retry is planned) and the request's GetBody (run for the retry's body,
// after the retry's cost is spent). The panic reaches the caller as it
// was; the answer is closed; the budget gets the cost back.
func TestPanickingCallerCodeLetsGo(t *testing.T) {
	tests := []struct {
		name    string
		backoff func() backoff.BackOff
		getBody func() (io.ReadCloser, error)
	}{
		{name: "backoff factory", backoff: func() backoff.BackOff { panic("backoff") }},
		{name: "backoff schedule", backoff: func() backoff.BackOff { return panickySchedule{} }},
		{name: "GetBody", getBody: func() (io.ReadCloser, error) { panic("GetBody") }},
	}
	for _, tt := range tests {
		for _, attemptTimeout := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprintf("%s, attempt timeout %v", tt.name, attemptTimeout), func(t *testing.T) {
				rc := testkit.NewRecorder(testkit.Status(http.StatusServiceUnavailable), testkit.Status(http.StatusCreated))
				opts := []Option{withClock(newFakeClock()), WithRetryBudget(100, 5), WithAttemptTimeout(attemptTimeout),
					WithBackoff(constBackoff(10 * time.Millisecond))}
				if tt.backoff != nil {
					opts = append(opts, WithBackoff(tt.backoff))
				}
				tr := NewTransport(mockBase(rc), opts...)
				req := newReq(t, context.Background(), http.MethodPost, `{"amount":1}`)
				if tt.getBody != nil {
					req.GetBody = tt.getBody
				}
				testkit.WantPanic(t, "", func() {
					resp, _ := tr.RoundTrip(req)
					closeResp(resp)
				})
				wantLetGo(t, rc, tr)
			})
		}
	}
}

// panickySchedule is a backoff schedule that panics when asked for a wait.
type panickySchedule struct{}

func (panickySchedule) NextBackOff() time.Duration { panic("backoff") }
func (panickySchedule) Reset()                     {}

// TestClientPanickingRedirectCodeLetsGo: net/http runs the caller's code
// while the answer of a redirect hop is open, before it closes it and
// sends the next hop: the http.Client's CheckRedirect and its Jar's
// SetCookies (see WithHTTPClient), and the request's GetBody for the next
// hop's body. Should one panic, Client.Do closes that answer before the
// panic goes on, as it was, to the caller (who may recover, as net/http's
// server does for a handler, and would be left with the connection held).
func TestClientPanickingRedirectCodeLetsGo(t *testing.T) {
	tests := []struct {
		name    string
		hc      *http.Client
		getBody func() (io.ReadCloser, error)
	}{
		{name: "CheckRedirect", hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { panic("CheckRedirect") }}},
		{name: "Jar.SetCookies", hc: &http.Client{Jar: panickyJar{}}},
		{name: "GetBody", hc: &http.Client{}, getBody: func() (io.ReadCloser, error) { panic("GetBody") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(
				testkit.StatusH(http.StatusTemporaryRedirect, "Location", "/v1/moved", "Set-Cookie", "session=1"),
				testkit.Status(http.StatusCreated))
			c := NewClient(WithBase(mockBase(rc)), WithHTTPClient(tt.hc), withClock(newFakeClock()))
			req := newReq(t, context.Background(), http.MethodPost, `{"amount":1}`)
			if tt.getBody != nil {
				req.GetBody = tt.getBody
			}
			testkit.WantPanic(t, tt.name[:5], func() {
				resp, _ := c.Do(req)
				closeResp(resp)
			})
			bodies := rc.Bodies()
			if len(bodies) != 1 {
				t.Fatalf("%d attempts, want 1", len(bodies))
			}
			if !bodies[0].Closed() {
				t.Error("the redirect's answer was left open")
			}
		})
	}
}

// panickyJar is a cookie jar that panics when given cookies.
type panickyJar struct{}

func (panickyJar) SetCookies(*url.URL, []*http.Cookie) { panic("Jar.SetCookies") }
func (panickyJar) Cookies(*url.URL) []*http.Cookie     { return nil }
