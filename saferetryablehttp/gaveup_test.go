package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestErrorSaysWhyRetriesStopped: the *saferetry.Error of a request whose
// last attempt got no answer carries what stopped the retries, as the
// Transport's does, and its text names a limit that gave up.
func TestErrorSaysWhyRetriesStopped(t *testing.T) {
	for _, tt := range []struct {
		name     string
		opts     []Option
		setup    func(c *retryablehttp.Client)
		deadline time.Duration // 0: none
		attempts int
		want     saferetry.Reason
	}{
		{name: "max attempts", opts: []Option{WithMaxAttempts(2)}, attempts: 2, want: saferetry.ReasonMaxAttempts},
		// A retry after a transport error costs 10: one is paid, the next is not.
		{name: "budget exhausted", opts: []Option{WithMaxAttempts(4), WithRetryBudget(10, 5)}, attempts: 2, want: saferetry.ReasonBudgetExhausted},
		{name: "deadline too close", setup: func(c *retryablehttp.Client) { c.RetryWaitMin, c.RetryWaitMax = time.Hour, time.Hour },
			deadline: time.Minute, attempts: 1, want: saferetry.ReasonDeadline},
		{name: "unsafe method without key", opts: []Option{WithKeyMethods()}, attempts: 1, want: saferetry.ReasonNoKey},
		{name: "not retryable", opts: []Option{WithClassifier(func(*http.Request, *http.Response, error) saferetry.Decision { return saferetry.DecisionReturn })},
			attempts: 1, want: saferetry.ReasonClassifier},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
			c := newRetryable(t, rc, tt.opts...)
			if tt.setup != nil {
				tt.setup(c)
			}
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			_, err := c.Do(rhReq(t, ctx, http.MethodPost, "x"))
			var e *saferetry.Error
			if !errors.As(err, &e) || e.Attempts != tt.attempts {
				t.Fatalf("err = %v, want a *saferetry.Error after %d attempts", err, tt.attempts)
			}
			if e.Reason != tt.want {
				t.Errorf("Reason = %q, want %q", e.Reason, tt.want)
			}
			if gaveUp := strings.Contains(err.Error(), "gave up: "+string(tt.want)); gaveUp != tt.want.IsLimit() {
				t.Errorf("Error() = %q; says it gave up for %q: %v, want %v", err.Error(), tt.want, gaveUp, tt.want.IsLimit())
			}
		})
	}
}

// TestErrorSaysRetryMaxGaveUp: without the per-request state (a
// RequestLogHook set after Configure replaced its own), the decision
// knows only the attempt in hand and asks for a retry, and retryablehttp
// stops by itself at RetryMax: the *saferetry.Error says that the attempt
// limit gave up, as the Transport's does, not the reason of a retry that
// was never made.
func TestErrorSaysRetryMaxGaveUp(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
	c := newRetryable(t, rc, WithMaxAttempts(3))
	c.RequestLogHook = func(retryablehttp.Logger, *http.Request, int) {}
	_, err := c.Do(rhReq(t, context.Background(), http.MethodGet, ""))
	var e *saferetry.Error
	if !errors.As(err, &e) || e.Attempts != 3 || len(rc.Seen()) != 3 {
		t.Fatalf("err = %v after %d attempts, want a *saferetry.Error after 3", err, len(rc.Seen()))
	}
	if e.Reason != saferetry.ReasonMaxAttempts || !strings.Contains(err.Error(), "gave up: max attempts") {
		t.Errorf("Reason = %q, Error() = %q; want %q, told as a give-up", e.Reason, err.Error(), saferetry.ReasonMaxAttempts)
	}
}
