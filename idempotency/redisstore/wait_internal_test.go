package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestWaitMillis checks WAIT's timeout argument (millis): a timeout under a
// millisecond must not become 0, which WAIT takes as "for ever".
func TestWaitMillis(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0}, // WithWait documents 0 as "for ever"
		{time.Nanosecond, 1},
		{500 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{1500 * time.Microsecond, 2},
		{2 * time.Second, 2000},
	} {
		if got := millis(tc.d); got != tc.want {
			t.Errorf("millis(%v) = %d, want %d (WAIT's timeout)", tc.d, got, tc.want)
		}
	}
}

// TestNegativeWaitPanics checks that New refuses WithWait with a negative
// timeout, which Redis would refuse on every write, and takes one of zero.
func TestNegativeWaitPanics(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New does not dial
	defer rdb.Close()
	func() {
		defer func() {
			if r, _ := recover().(string); !strings.Contains(r, "negative") {
				t.Errorf("New with WithWait(1, -1s) recovered %q; want a panic about the negative timeout", r)
			}
		}()
		New(rdb, WithWait(1, -time.Second))
	}()
	New(rdb, WithWait(1, 0))            // for ever, as documented
	New(rdb, WithWait(0, -time.Second)) // waiting off: the timeout is not used
}
