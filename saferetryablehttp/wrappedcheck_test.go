package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestWrappedCheckRetryStops: a CheckRetry of the caller's set around
// Configure's that stops a retry Configure's allowed (and paid) leaves
// no cost spent, with a context that never ends, whether the attempt got
// an answer (returned as it is) or an error, and whatever error the
// wrapper returns with it: the budget of 10 at cost 5 still affords the
// next request its two retries. A request that ends without an answer
// ends in a *saferetry.Error that says the caller's code stopped it
// ([saferetry.ReasonClassifier]), not in no reason, nor in the bare
// attempt error.
func TestWrappedCheckRetryStops(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first testkit.Outcome
		// passAttemptErr: the wrapper returns the attempt's error when it
		// stops, not Configure's CheckRetry's.
		passAttemptErr bool
	}{
		{"after an answer", testkit.Status(http.StatusServiceUnavailable), false},
		{"after a transport error", testkit.Fail(testkit.ErrReset), false},
		{"after a transport error, the attempt's error returned", testkit.Fail(testkit.ErrReset), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.first)
			c := newRetryable(t, rc, WithRetryBudget(10, 5), WithMaxAttempts(4))
			var stop atomic.Bool
			stop.Store(true)
			inner := c.CheckRetry
			c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
				retry, checkErr := inner(ctx, resp, err)
				if !stop.Load() {
					return retry, checkErr
				}
				if tt.passAttemptErr {
					return false, err
				}
				return false, checkErr
			}
			resp, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
			if tt.first.Err == nil {
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("Do: %v, %v; want the 503", resp, err)
				}
				resp.Body.Close()
			} else {
				var e *saferetry.Error
				if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Attempts != 1 || e.Key == "" {
					t.Fatalf("Do: %v; want a *saferetry.Error, outcome unknown after 1 attempt, with the key", err)
				}
				if e.Reason != saferetry.ReasonClassifier {
					t.Errorf("Reason = %q, want %q", e.Reason, saferetry.ReasonClassifier)
				}
				if !errors.Is(err, testkit.ErrReset) {
					t.Errorf("Do: %v; want the attempt's error under it", err)
				}
			}
			if n := len(rc.Seen()); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
			stop.Store(false)
			wantTwoRetries(t, c, rc)
		})
	}
}
