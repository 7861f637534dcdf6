// Tests of the review of the adapter's wait arithmetic at extreme
// configurations.

package saferetryablehttp

import (
	"math"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
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
