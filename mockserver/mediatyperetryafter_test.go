package mockserver_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentMediaTypeInProgressRetryAfter: the 409 in progress answered
// to a retry with a refused media type says the Retry-After that the
// idempotency Middleware says to a retry of the same payment sent as JSON:
// its estimate of how long the route runs (here over a second, from a
// payment that took 1.2 s of the synctest bubble's fake time), not always
// 1.
func TestPaymentMediaTypeInProgressRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		ln := newPipeListener()
		srv := mockserver.New(mockserver.WithListener(ln), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.Header.Get("Idempotency-Key") {
				case "slow":
					time.Sleep(1200 * time.Millisecond) // fake time: the route's estimate, 2 s rounded up
				case "held":
					once.Do(func() { close(entered); <-release })
				}
				next.ServeHTTP(w, r)
			})
		}))
		defer srv.Close()
		client := ln.client()
		defer client.CloseIdleConnections()
		post := func(key string, h http.Header) (*http.Response, []byte) {
			t.Helper()
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(payBody))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = h.Clone()
			req.Header.Set("Idempotency-Key", key)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp, b
		}
		asJSON := http.Header{"Content-Type": {"application/json"}}
		if resp, b := post("slow", asJSON); resp.StatusCode != http.StatusCreated {
			t.Fatalf("slow payment: %d %s", resp.StatusCode, b)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, b := post("held", asJSON); resp.StatusCode != http.StatusCreated {
				t.Errorf("held payment: %d %s", resp.StatusCode, b)
			}
		}()
		<-entered
		defer func() { close(release); <-done }()

		dup, b := post("held", asJSON)
		wantProblem(t, dup, b, http.StatusConflict, idempotency.ProblemInProgress)
		want := dup.Header.Get("Retry-After")
		if want != "2" {
			t.Fatalf("the Middleware's 409: Retry-After %q, want its estimate of the slow run, 2", want)
		}
		resp, b := post("held", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}})
		wantProblem(t, resp, b, http.StatusConflict, idempotency.ProblemInProgress)
		if got := resp.Header.Get("Retry-After"); got != want {
			t.Errorf("refused retry in progress: Retry-After %q, the Middleware's 409 says %q", got, want)
		}
	})
}
