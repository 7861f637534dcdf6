// Tests of the review of the adapter's wait arithmetic at extreme
// configurations.

package saferetryablehttp

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/jarcoal/httpmock"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestExponentialWaitNeverWrapsPastAnUncappedMax: with RetryWaitMax set
// to the largest Duration (no cap), the exponential wait grows from
// RetryWaitMin and stays at the cap once doubling would pass it. Doubling
// past the int64 range must not wrap around to a wait of 0 (a retry at
// once, again and again) or a negative longest wait, which CheckRetry
// checks against the deadline.
func TestExponentialWaitNeverWrapsPastAnUncappedMax(t *testing.T) {
	c := retryablehttp.NewClient()
	Configure(c)
	const maxWait = time.Duration(math.MaxInt64)
	for _, attempt := range []int{34, 40, 64, 100} {
		if d := c.Backoff(time.Second, maxWait, attempt, nil); d < maxWait/2 {
			t.Errorf("attempt %d: wait %v; want at least half the cap, %v", attempt, d, maxWait/2)
		}
		if d := exponentialCap(time.Second, maxWait, attempt); d != maxWait {
			t.Errorf("attempt %d: longest wait %v; want the cap, %v", attempt, d, maxWait)
		}
	}
}

// TestRetryMaxOfMaxIntStillRetries: a RetryMax of math.MaxInt (retries
// bounded by the context and the budget alone), which retryablehttp
// takes as it is, must let the adapter retry a 503. The attempt limit
// RetryMax+1 wrapped around to a negative count, which every attempt
// reached: no request was ever retried.
func TestRetryMaxOfMaxIntStillRetries(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(http.StatusServiceUnavailable), testkit.Status(http.StatusCreated))
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, time.Millisecond
	c.RetryMax = math.MaxInt
	httpmock.ActivateNonDefault(c.HTTPClient)
	httpmock.RegisterNoResponder(rc.Respond)
	orig := c.HTTPClient
	t.Cleanup(func() {
		httpmock.DeactivateNonDefault(orig)
		httpmock.Reset()
	})
	Configure(c)
	resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
	if resp.StatusCode != http.StatusCreated || len(rc.Seen()) != 2 {
		t.Errorf("status %d after %d attempts; want 201 after 2", resp.StatusCode, len(rc.Seen()))
	}
}
