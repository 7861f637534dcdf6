package saferetry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestReasonFromResponse: a response that a plain http.Client using the
// Transport returns tells why the operation ended on it, as the
// operation's last hook saw it: a 503 returned because a limit gave up
// on it names the limit, a final answer says so. It does through the
// attempts' own contexts (WithAttemptTimeout) and after a redirect (the
// last hop's operation), without allocating, and says nothing for a
// response that no Transport made.
func TestReasonFromResponse(t *testing.T) {
	unavailable := testkit.Status(http.StatusServiceUnavailable)
	for _, tt := range []struct {
		name     string
		script   []testkit.Outcome
		opts     []Option
		deadline time.Duration // from the fake clock's now; 0: none
		want     Reason
	}{
		{name: "max attempts", script: []testkit.Outcome{unavailable}, opts: []Option{WithMaxAttempts(2)}, want: ReasonMaxAttempts},
		{name: "budget exhausted", script: []testkit.Outcome{unavailable}, opts: []Option{WithMaxAttempts(4), WithRetryBudget(5, 5)}, want: ReasonBudgetExhausted},
		{name: "deadline too close", script: []testkit.Outcome{unavailable}, opts: []Option{WithBackoff(constBackoff(time.Minute))}, deadline: 30 * time.Second, want: ReasonDeadline},
		{name: "retry-after past the deadline", script: []testkit.Outcome{testkit.StatusH(http.StatusServiceUnavailable, "Retry-After", "60")}, deadline: 30 * time.Second, want: ReasonDeadline},
		{name: "final status", script: []testkit.Outcome{unavailable, testkit.Status(http.StatusCreated)}, want: ReasonFinalStatus},
		{name: "replayed", script: []testkit.Outcome{testkit.StatusH(http.StatusServiceUnavailable, HeaderReplayed, "true")}, want: ReasonReplayed},
		{name: "attempt timeout set", script: []testkit.Outcome{unavailable}, opts: []Option{WithMaxAttempts(2), WithAttemptTimeout(time.Hour)}, want: ReasonMaxAttempts},
		{name: "after a redirect", script: []testkit.Outcome{testkit.StatusH(http.StatusTemporaryRedirect, "Location", "http://api.test/v1/other"), unavailable},
			opts: []Option{WithMaxAttempts(2)}, want: ReasonMaxAttempts},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk, hl := testTransport(testkit.NewRecorder(tt.script...), tt.opts...)
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clk.Now().Add(tt.deadline))
				defer cancel()
			}
			resp, err := (&http.Client{Transport: tr}).Do(newReq(t, ctx, http.MethodPost, "x"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got, ok := ReasonFromResponse(resp)
			if !ok || got != tt.want {
				t.Errorf("ReasonFromResponse = %q, %v; want %q, true", got, ok, tt.want)
			}
			if n := testing.AllocsPerRun(10, func() { _, _ = ReasonFromResponse(resp) }); n != 0 {
				t.Errorf("ReasonFromResponse allocates %.0f times, want none", n)
			}
			as := hl.Attempts()
			if last := as[len(as)-1].Reason; got != last {
				t.Errorf("ReasonFromResponse = %q, the last hook saw %q", got, last)
			}
		})
	}
	t.Run("no Transport", func(t *testing.T) {
		for _, resp := range []*http.Response{nil, {}, {Request: newReq(t, context.Background(), http.MethodGet, "")}} {
			if got, ok := ReasonFromResponse(resp); ok || got != "" {
				t.Errorf("ReasonFromResponse(%v) = %q, %v; want \"\", false", resp, got, ok)
			}
		}
	})
}
