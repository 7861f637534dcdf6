package saferetryablehttp

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestRetriedAnswerIsPaid: the retry of an answer is paid, whether
// Configure's Backoff or one of the caller's set after Configure chooses
// its wait (retryablehttp closes the answer before either runs): a
// budget of 10 at cost 5 pays two retries of a 503, not a third.
func TestRetriedAnswerIsPaid(t *testing.T) {
	for _, ownBackoff := range []bool{false, true} {
		name := "Configure's Backoff"
		if ownBackoff {
			name = "the caller's Backoff"
		}
		t.Run(name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(http.StatusServiceUnavailable))
			c := newRetryable(t, rc, WithRetryBudget(10, 5), WithMaxAttempts(5))
			if ownBackoff {
				c.Backoff = func(time.Duration, time.Duration, int, *http.Response) time.Duration { return time.Millisecond }
			}
			resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
			if n := len(rc.Seen()); resp.StatusCode != http.StatusServiceUnavailable || n != 3 {
				t.Errorf("status %d after %d attempts, want 503 after 3 (two retries paid, the budget then empty)", resp.StatusCode, n)
			}
		})
	}
}
