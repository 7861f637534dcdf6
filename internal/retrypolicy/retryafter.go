package retrypolicy

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// maxRetryAfterSeconds keeps delta-seconds from overflowing a Duration;
// anything larger is far beyond any cap and is clamped to it.
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// parseRetryAfter interprets a Retry-After value (RFC 9110 §10.2.3) as a
// wait from now: delta-seconds, or an HTTP-date (IMF-fixdate, RFC 850 or
// asctime form). A date in the past means no wait. ok is false for an
// empty or malformed value.
func parseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if c := value[0]; c >= '0' && c <= '9' {
		var secs int64
		for i := 0; i < len(value); i++ {
			c := value[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if secs <= maxRetryAfterSeconds {
				secs = secs*10 + int64(c-'0')
			}
		}
		if secs > maxRetryAfterSeconds {
			secs = maxRetryAfterSeconds
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	if d = t.Sub(now); d < 0 {
		d = 0
	}
	return d, true
}

// honoursRetryAfter reports whether Retry-After is taken into account for
// status: 409 (in progress), 429 and 503.
func honoursRetryAfter(status int) bool {
	return status == http.StatusConflict || status == http.StatusTooManyRequests ||
		status == http.StatusServiceUnavailable
}

// RetryAfter returns the capped, jittered wait a response asks for, the
// server's own (uncapped) value, and whether the response asked for one
// (status 409, 429 or 503 with a well-formed Retry-After). rnd draws the
// jitter (see [Jitter]); with nil rnd the wait is the longest that the
// jitter could make it, for a caller that draws the wait itself later.
func RetryAfter(resp *http.Response, now time.Time, limit time.Duration, rnd func(int64) int64) (wait, asked time.Duration, ok bool) {
	if resp == nil || !honoursRetryAfter(resp.StatusCode) {
		return 0, 0, false
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, 0, false
	}
	asked, ok = parseRetryAfter(v, now)
	if !ok {
		return 0, 0, false
	}
	return jitterCapped(asked, limit, rnd), asked, true
}

// jitterCapped caps d at limit and spreads it by up to a tenth, so that
// clients told the same Retry-After do not return in lockstep; the result
// never exceeds limit. A d within the limit is honoured: the jitter is
// added, and only up to limit, so that no retry comes before the server
// said. A d beyond the limit, which is not honoured in full anyway, has
// the jitter taken off the limit instead. With nil rnd it returns the
// largest result any rnd could give.
func jitterCapped(d, limit time.Duration, rnd func(int64) int64) time.Duration {
	if d > limit {
		spread := int64(limit / 10)
		if rnd == nil || spread <= 0 {
			return limit
		}
		return limit - time.Duration(rnd(spread+1))
	}
	spread := min(int64(d/10), int64(limit-d))
	if spread <= 0 {
		return d
	}
	if rnd == nil {
		return d + time.Duration(spread)
	}
	return d + time.Duration(rnd(spread+1))
}

// Jitter returns a uniform random number in [0, n); it is the source of
// randomness for Retry-After jitter.
func Jitter(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return rand.Int64N(n)
}
