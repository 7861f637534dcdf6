package saferetryablehttp

import (
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// A Retry-After that asks for less than the exponential wait (0, or an
// HTTP-date already past) does not shorten it, as with the Transport (see
// saferetry's TestRetryAfterNeverShortensTheBackoff): the wait is the
// longer of the two.
func TestRetryableRetryAfterNeverShortensTheBackoff(t *testing.T) {
	c := retryablehttp.NewClient()
	a := newAdapter(c, newConfig(nil))
	for _, asked := range []string{"0", "Mon, 01 Jan 2001 00:00:00 GMT"} {
		for _, status := range []int{409, 429, 503} {
			resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {asked}}}
			for attempt := range 3 {
				low := exponentialCap(100*time.Millisecond, time.Second, attempt) / 2
				if w := a.backoff(100*time.Millisecond, time.Second, attempt, resp); w < low {
					t.Fatalf("%d with Retry-After %q, retry %d: wait %v, want at least the exponential wait's lower bound %v",
						status, asked, attempt+1, w, low)
				}
			}
		}
	}
}
