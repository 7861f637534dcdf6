package idempotency_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
)

func withPath(p string) reqOpt { return func(r *http.Request) { r.URL.Path = p } }

// TestInProgressRetryAfterFollowsTheHandler checks, on fake time, that a
// 409's Retry-After says when the holder will likely be done: 1 s before a
// run of the route was seen (not the holder's whole lease), then the
// route's moving estimate rounded up, kept apart per route, and never
// beyond the holder's remaining lease.
func TestInProgressRetryAfterFollowsTheHandler(t *testing.T) {
	const lease = 10 * time.Second
	clk := clock.NewManual(fakeStart)
	st := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	app := &counter{before: func(_ http.ResponseWriter, r *http.Request) int {
		if strings.HasPrefix(r.Header.Get(idempotency.HeaderIdempotencyKey), "hold") {
			held <- struct{}{}
			<-hold
			return 0
		}
		switch r.URL.Path {
		case "/slow":
			clk.Advance(3200 * time.Millisecond) // the handler's running time
		case "/long":
			clk.Advance(2 * lease / 3)
		case "/refused":
			clk.Advance(5 * time.Second)
			return http.StatusNotFound
		case "/failing":
			clk.Advance(5 * time.Second)
			return http.StatusServiceUnavailable
		}
		return 0
	}}
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk))(app)

	// retryAfter holds key on path and returns the Retry-After a duplicate
	// gets meanwhile.
	retryAfter := func(key, path string) string {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); post(h, key, `{}`, withPath(path)) }()
		<-held
		w := post(h, key, `{}`, withPath(path))
		wantProblem(t, w, http.StatusConflict, idempotency.ProblemInProgress)
		hold <- struct{}{}
		<-done
		return w.Header().Get("Retry-After")
	}

	if got := retryAfter("hold-1", "/first"); got != "1" {
		t.Fatalf("Retry-After before any run = %q, want 1 (not the %v lease)", got, lease)
	}
	for _, k := range []string{"s1", "s2", "s3"} {
		if w := post(h, k, `{}`, withPath("/slow")); w.Code != http.StatusCreated {
			t.Fatalf("run %s = %d %s", k, w.Code, w.Body)
		}
	}
	if got := retryAfter("hold-2", "/slow"); got != "4" {
		t.Fatalf("Retry-After after runs of 3.2 s = %q, want 4", got)
	}
	if got := retryAfter("hold-3", "/never-run"); got != "1" {
		t.Fatalf("Retry-After on a route never run = %q, want 1", got)
	}
	// Runs that did not do the work (a refusal, a failure) are not taken in.
	for _, path := range []string{"/refused", "/failing"} {
		post(h, "r"+path, `{}`, withPath(path))
		if got := retryAfter("hold"+path, path); got != "1" {
			t.Fatalf("Retry-After after a %s run of 5 s = %q, want 1", path, got)
		}
	}
	for _, k := range []string{"l1", "l2"} {
		if w := post(h, k, `{}`, withPath("/long")); w.Code != http.StatusCreated {
			t.Fatalf("run %s = %d %s", k, w.Code, w.Body)
		}
	}
	// Runs of 6.7 s, and the holder's claim has just been made with 10 s
	// left: the estimate is answered; it is bounded by the lease below.
	if got := retryAfter("hold-4", "/long"); got != "7" {
		t.Fatalf("Retry-After after runs of 6.7 s = %q, want 7", got)
	}
}
