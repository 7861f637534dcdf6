package saferetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
		})
	}
}

// panickyHandler is a slog handler that panics on every record.
type panickyHandler struct{ slog.Handler }

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
			})
		}
	}
}

// panickySchedule is a backoff schedule that panics when asked for a wait.
type panickySchedule struct{}

func (panickySchedule) NextBackOff() time.Duration { panic("backoff") }
func (panickySchedule) Reset()                     {}
