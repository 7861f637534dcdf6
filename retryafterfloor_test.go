package saferetry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// A Retry-After that asks for less than the backoff schedule's wait (0, or
// an HTTP-date already past, as a payment API's rate limiter or a load
// balancer sends) does not shorten that wait: the retries of a server that
// answers 503 with Retry-After: 0 would otherwise all go out at once, with
// no jitter either, and every client told so would come back in lockstep.
// The wait is the longer of the two, as Stripe's SDKs take it, so no retry
// comes before the server said, nor before the backoff would.
func TestRetryAfterNeverShortensTheBackoff(t *testing.T) {
	for _, asked := range []string{"0", "Mon, 01 Jan 2001 00:00:00 GMT"} {
		t.Run(asked, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.StatusH(503, "Retry-After", asked), testkit.StatusH(429, "Retry-After", asked),
				testkit.StatusH(409, "Retry-After", asked), testkit.Status(201))
			tr, clk, hl := testTransport(rc, WithBackoff(constBackoff(200*time.Millisecond)))
			resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
			if resp.StatusCode != 201 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			w := clk.Waits()
			if len(w) != 3 {
				t.Fatalf("Retry-After %q on three answers: waits %v, want three of the backoff's 200ms", asked, w)
			}
			for i, d := range w {
				if d != 200*time.Millisecond {
					t.Errorf("wait %d = %v, want the backoff's 200ms", i+1, d)
				}
				if a := hl.Attempts()[i]; a.Wait != d || a.Reason != ReasonRetryAfter {
					t.Errorf("attempt %d reported wait %v reason %q", i+1, a.Wait, a.Reason)
				}
			}
		})
	}
}
