package saferetry

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

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
