package saferetryablehttp

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry/internal/testkit"
)

// noBodyFirst makes c's base answer its first requests, while *first is
// true, with a 503 whose Body is http.NoBody, as net/http's is for an
// answer without a body; later ones go to the mock as before.
func noBodyFirst(first *bool) func(*retryablehttp.Client) {
	return func(c *retryablehttp.Client) {
		mock := c.HTTPClient.Transport
		c.HTTPClient.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !*first {
				return mock.RoundTrip(r)
			}
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{},
				Body: http.NoBody, Request: r}, nil
		})
	}
}

// TestRetriedNoBodyAnswerIsPaid: the retry of an answer without a body
// (http.NoBody) is paid as that of any answer (see TestRetriedAnswerIsPaid):
// a budget of 10 at cost 5 pays two retries, not a third, whether
// Configure's Backoff or one of the caller's chooses the wait.
func TestRetriedNoBodyAnswerIsPaid(t *testing.T) {
	for _, ownBackoff := range []bool{false, true} {
		name := "Configure's Backoff"
		if ownBackoff {
			name = "the caller's Backoff"
		}
		t.Run(name, func(t *testing.T) {
			var attempts int
			first := true
			c := newRetryableWith(t, testkit.NewRecorder(), noBodyFirst(&first), WithRetryBudget(10, 5), WithMaxAttempts(5))
			if ownBackoff {
				c.Backoff = func(time.Duration, time.Duration, int, *http.Response) time.Duration { return time.Millisecond }
			}
			prev := c.RequestLogHook
			c.RequestLogHook = func(l retryablehttp.Logger, r *http.Request, retry int) {
				prev(l, r, retry)
				attempts++
			}
			resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
			if resp.StatusCode != http.StatusServiceUnavailable || attempts != 3 {
				t.Errorf("status %d after %d attempts, want 503 after 3 (two retries paid, the budget then empty)", resp.StatusCode, attempts)
			}
		})
	}
}
