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

// TestStoppedAnswerKeepsNoBody: the answer without a body (http.NoBody)
// that a CheckRetry of the caller's around Configure's kept from its retry
// comes back with http.NoBody as its Body, which callers compare against,
// not a wrapper of it, and its retry's cost goes back all the same: the
// budget of 10 at cost 5 still pays the next request's two retries.
func TestStoppedAnswerKeepsNoBody(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(http.StatusCreated))
	first := true
	c := newRetryableWith(t, rc, noBodyFirst(&first), WithRetryBudget(10, 5), WithMaxAttempts(4))
	inner := c.CheckRetry
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		retry, checkErr := inner(ctx, resp, err)
		if first {
			return false, checkErr
		}
		return retry, checkErr
	}
	resp, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Do: %v, %v; want the 503", resp, err)
	}
	if resp.Body != http.NoBody {
		t.Errorf("Body = %T, want http.NoBody", resp.Body)
	}
	resp.Body.Close()
	first = false
	wantTwoRetries(t, c, rc)
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
