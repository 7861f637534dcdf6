package saferetryablehttp

import (
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// longestWait is the schedule that CheckRetry's decision checks against
// the deadline: for the retry after attempt n (from 0), the top of the
// range Backoff draws from, read from the client when the request runs.
type longestWait struct {
	c *retryablehttp.Client
	n int
}

func (w *longestWait) NextBackOff() time.Duration {
	d := exponentialCap(w.c.RetryWaitMin, w.c.RetryWaitMax, w.n)
	w.n++
	return d
}

func (w *longestWait) Reset() { w.n = 0 }

// exponentialCap is minWait·2^attempt capped at maxWait. A doubling that
// would pass maxWait gives maxWait: it could pass the int64 range too.
func exponentialCap(minWait, maxWait time.Duration, attempt int) time.Duration {
	d := minWait
	for i := 0; i < attempt && d < maxWait; i++ {
		if d > maxWait/2 {
			return maxWait
		}
		d *= 2
	}
	return min(d, maxWait)
}

// exponentialWait is [exponentialCap] with "equal jitter": a uniform draw
// from its upper half.
func exponentialWait(minWait, maxWait time.Duration, attempt int) time.Duration {
	d := exponentialCap(minWait, maxWait, attempt)
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + time.Duration(retrypolicy.Jitter(int64(d-half)+1))
}
