package idempotency

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestInProgressRetryAfterBounds: the Retry-After of a 409 is the expected
// running time rounded up, at least 1 s, at most the remaining lease.
func TestInProgressRetryAfterBounds(t *testing.T) {
	for _, tt := range []struct {
		expected, left time.Duration
		want           int
	}{
		{0, 10 * time.Second, 1},
		{200 * time.Millisecond, 10 * time.Second, 1},
		{3200 * time.Millisecond, 10 * time.Second, 4},
		{30 * time.Second, 9500 * time.Millisecond, 10},
		{30 * time.Second, 0, 1},
	} {
		if got := inProgressRetryAfter(tt.expected, tt.left); got != tt.want {
			t.Errorf("inProgressRetryAfter(%v, %v) = %d, want %d", tt.expected, tt.left, got, tt.want)
		}
	}
}

// TestRunTimesMovingEstimate: the estimate starts at the first run, moves
// a fifth of the way to each new one, and routes beyond maxRoutes share
// one estimate.
func TestRunTimesMovingEstimate(t *testing.T) {
	var rt runTimes
	req := func(path string) *http.Request { return httptest.NewRequest(http.MethodPost, path, nil) }
	if got := rt.estimate(req("/a")); got != 0 {
		t.Fatalf("estimate before a run = %v", got)
	}
	long := req("/" + strings.Repeat("x", maxRoutePath))
	rt.observe(long, 3*time.Second)
	if len(rt.routes) != 0 || rt.estimate(long) != 3*time.Second {
		t.Fatalf("a long path was kept as a route of its own (%d routes), or lost", len(rt.routes))
	}
	rt.observe(req("/a"), time.Second)
	rt.observe(req("/a"), 6*time.Second)
	if got := rt.estimate(req("/a")); got != 2*time.Second {
		t.Fatalf("estimate = %v, want 2s", got)
	}
	pat := req("/a/7")
	pat.Pattern = "POST /a/{id}"
	rt.observe(pat, 5*time.Second)
	other := req("/a/8")
	other.Pattern = "POST /a/{id}"
	if got := rt.estimate(other); got != 5*time.Second {
		t.Fatalf("estimate of the pattern = %v, want 5s", got)
	}
	for i := range maxRoutes {
		rt.observe(req(fmt.Sprintf("/n/%d", i)), time.Millisecond)
	}
	rt.observe(req("/beyond-1"), 9*time.Second)
	if got, shared := rt.estimate(req("/beyond-2")), rt.estimate(req("/beyond-1")); got == 0 || got != shared {
		t.Fatalf("estimate of a route beyond the table = %v, want the shared %v", got, shared)
	}
	if len(rt.routes) != maxRoutes {
		t.Fatalf("routes kept = %d, want %d", len(rt.routes), maxRoutes)
	}
}
