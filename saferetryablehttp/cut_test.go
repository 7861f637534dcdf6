package saferetryablehttp

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"testing"
	"time"
)

// TestCutAttemptLinkLastsAsItsError: the link from net/http's error of a
// cut attempt to its request's state leads there from the error and from
// one that wraps it, once, and goes with the error when nothing took it
// (a retry made, or stopped out of sight), keeping nothing of the request.
func TestCutAttemptLinkLastsAsItsError(t *testing.T) {
	var c cutAttempts
	st := &rhOp{}
	ue := &url.Error{Op: "Post", URL: "http://api.test/", Err: context.DeadlineExceeded}
	c.link(ue, st)
	if got := c.take(fmt.Errorf("stopped: %w", ue)); got != st {
		t.Fatalf("take(wrapped error) = %p, want %p", got, st)
	}
	if got := c.take(ue); got != nil {
		t.Fatalf("second take = %p, want nil", got)
	}
	c.link(&url.Error{Op: "Post", URL: "http://api.test/", Err: context.DeadlineExceeded}, st)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		runtime.GC()
		c.mu.Lock()
		n := len(c.m)
		c.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d links left 5s after their error was dropped", n)
		}
	}
}
