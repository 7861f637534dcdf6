package saferetryablehttp

import (
	"context"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestReasonFromResponse: the answer a configured client returns, with a
// nil error whatever its status, tells through
// [saferetry.ReasonFromResponse] why the request ended on it, as the
// Transport's answers do: a 503 returned because a limit gave up on it
// names the limit, a final answer says so, and one that a CheckRetry of
// the caller's around Configure's kept from its retry says that the
// caller's code decided.
func TestReasonFromResponse(t *testing.T) {
	unavailable := testkit.Status(http.StatusServiceUnavailable)
	for _, tt := range []struct {
		name   string
		script []testkit.Outcome
		opts   []Option
		stop   bool // a CheckRetry around Configure's stops every retry
		want   saferetry.Reason
	}{
		{name: "max attempts", script: []testkit.Outcome{unavailable}, opts: []Option{WithMaxAttempts(2)}, want: saferetry.ReasonMaxAttempts},
		{name: "budget exhausted", script: []testkit.Outcome{unavailable}, opts: []Option{WithRetryBudget(5, 5)}, want: saferetry.ReasonBudgetExhausted},
		{name: "final status", script: []testkit.Outcome{unavailable, testkit.Status(http.StatusCreated)}, want: saferetry.ReasonFinalStatus},
		{name: "stopped by the caller's CheckRetry", script: []testkit.Outcome{unavailable}, stop: true, want: saferetry.ReasonClassifier},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newRetryable(t, testkit.NewRecorder(tt.script...), tt.opts...)
			if tt.stop {
				inner := c.CheckRetry
				c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
					_, checkErr := inner(ctx, resp, err)
					return false, checkErr
				}
			}
			resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
			if got, ok := saferetry.ReasonFromResponse(resp); !ok || got != tt.want {
				t.Errorf("ReasonFromResponse = %q, %v; want %q, true", got, ok, tt.want)
			}
		})
	}
}
