package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestRetryNotMadeIsRefunded: a retry that CheckRetry allowed, and so paid
// from the budget, and that retryablehttp then does not make because the
// client's PrepareRetry fails, is not paid for, as with a wait that the
// context cuts short: the budget of 10 at cost 5 still affords the next
// request its two retries. The cost stayed spent, for good with a context
// that never ends, whether the failed attempt had an answer or an error,
// and whether PrepareRetry was set before Configure or after it. On a
// client configured twice, the cost goes back to the budget that paid it,
// the second Configure's, not to the first one's, which no request uses
// any more.
func TestRetryNotMadeIsRefunded(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first testkit.Outcome
		after bool // PrepareRetry set after Configure
		twice bool // Configure called again
	}{
		{"after an answer", testkit.Status(http.StatusServiceUnavailable), false, false},
		{"after a transport error", testkit.Fail(testkit.ErrReset), false, false},
		{"after an answer, PrepareRetry set after Configure", testkit.Status(http.StatusServiceUnavailable), true, false},
		{"after an answer, Configure called twice", testkit.Status(http.StatusServiceUnavailable), false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.first)
			var fail atomic.Bool
			fail.Store(true)
			errPrepare := errors.New("cannot re-sign")
			prepare := func(*http.Request) error {
				if fail.Load() {
					return errPrepare
				}
				return nil
			}
			c := newRetryableWith(t, rc, func(c *retryablehttp.Client) {
				if !tt.after {
					c.PrepareRetry = prepare
				}
			}, WithRetryBudget(10, 5), WithMaxAttempts(4))
			if tt.after {
				c.PrepareRetry = prepare
			}
			if tt.twice {
				Configure(c, WithRetryBudget(10, 5), WithMaxAttempts(4))
			}
			if _, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x")); !errors.Is(err, errPrepare) {
				t.Fatalf("Do: %v, want PrepareRetry's error", err)
			}
			fail.Store(false)
			wantTwoRetries(t, c, rc)
		})
	}
}

// wantTwoRetries fails t unless c's next request, answered 503, 503 and
// then 201 by rc, is retried twice to the 201: its budget of 10 at cost
// 5 is whole again.
func wantTwoRetries(t *testing.T, c *retryablehttp.Client, rc *testkit.Recorder) {
	t.Helper()
	rc.Restart(testkit.Status(http.StatusServiceUnavailable), testkit.Status(http.StatusServiceUnavailable), testkit.Status(http.StatusCreated))
	resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
	if resp.StatusCode != http.StatusCreated || len(rc.Seen()) != 3 {
		t.Errorf("next request: status %d after %d attempts, want 201 after 3 (the budget paid for a retry never made)", resp.StatusCode, len(rc.Seen()))
	}
}
