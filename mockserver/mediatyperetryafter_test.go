package mockserver_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentMediaTypeInProgressRetryAfter: the 409 in progress answered
// to a retry with a refused media type says the Retry-After that the
// idempotency Middleware says to a retry of the same payment sent as JSON:
// its estimate of how long the route runs (here over a second, from a
// payment that took 1.2 s), not always 1.
func TestPaymentMediaTypeInProgressRetryAfter(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := mockserver.New(mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Header.Get("Idempotency-Key") {
			case "slow":
				time.Sleep(1200 * time.Millisecond) // the route's estimate: 2 s, rounded up
			case "held":
				once.Do(func() { close(entered); <-release })
			}
			next.ServeHTTP(w, r)
		})
	}))
	defer srv.Close()
	if _, resp, b := sendTyped(t, srv, "slow", []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated {
		t.Fatalf("slow payment: %d %s", resp.StatusCode, b)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, resp, b := sendTyped(t, srv, "held", []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated {
			t.Errorf("held payment: %d %s", resp.StatusCode, b)
		}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the held payment never reached the handler")
	}
	defer func() { close(release); <-done }()

	_, dup, b := sendTyped(t, srv, "held", []string{"application/json"}, payBody)
	wantProblem(t, dup, b, http.StatusConflict, idempotency.ProblemInProgress)
	want := dup.Header.Get("Retry-After")
	if want == "" || want == "1" {
		t.Fatalf("the Middleware's 409: Retry-After %q, want its estimate of the slow run, 2", want)
	}
	resp, b := sendHeaders(t, srv, http.Header{"Idempotency-Key": {"held"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, payBody)
	wantProblem(t, resp, b, http.StatusConflict, idempotency.ProblemInProgress)
	if got := resp.Header.Get("Retry-After"); got != want {
		t.Errorf("refused retry in progress: Retry-After %q, the Middleware's 409 says %q", got, want)
	}
}
