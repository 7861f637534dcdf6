package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestWrappedCheckRetryKeepsReason: a CheckRetry of the caller's around
// Configure's that follows its decision but returns the attempt's error,
// or none, in place of Configure's [*saferetry.Error], stops nothing: the
// request's Error names what did (here the budget, which cannot pay a
// transport error's retry), not the caller's code
// ([saferetry.ReasonClassifier]).
func TestWrappedCheckRetryKeepsReason(t *testing.T) {
	for _, tt := range []struct {
		name  string
		check func(retry bool, attemptErr error) (bool, error)
	}{
		{"no error", func(retry bool, _ error) (bool, error) { return retry, nil }},
		{"the attempt's error", func(retry bool, attemptErr error) (bool, error) { return retry, attemptErr }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
			c := newRetryable(t, rc, WithRetryBudget(1, 1))
			inner := c.CheckRetry
			c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
				retry, _ := inner(ctx, resp, err)
				return tt.check(retry, err)
			}
			_, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
			var e *saferetry.Error
			if !errors.As(err, &e) || e.Attempts != 1 {
				t.Fatalf("Do: %v; want a *saferetry.Error after 1 attempt", err)
			}
			if e.Reason != saferetry.ReasonBudgetExhausted {
				t.Errorf("Reason = %q, want %q", e.Reason, saferetry.ReasonBudgetExhausted)
			}
		})
	}
}
