package saferetry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// A Retry-After at or below the cap is honoured: the jitter is added to
// it (up to the cap), never taken off, so that no retry comes before the
// server said. Only a Retry-After beyond the cap, which is not honoured in
// full anyway, is jittered below the cap.
func TestRetryAfterBelowTheCapIsNeverShortened(t *testing.T) {
	for _, asked := range []string{"29", "30"} {
		for range 40 {
			rc := testkit.NewRecorder(testkit.StatusH(503, "Retry-After", asked), testkit.Status(201))
			tr, clk, _ := testTransport(rc, WithMaxRetryAfter(30*time.Second))
			resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
			if resp.StatusCode != 201 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			w := clk.Waits()
			if len(w) != 1 || w[0] < mustSeconds(asked) || w[0] > 30*time.Second {
				t.Fatalf("Retry-After %s, cap 30s: waits %v; want one in [%ss, 30s]", asked, w, asked)
			}
		}
	}
}

func mustSeconds(s string) time.Duration {
	d, err := time.ParseDuration(s + "s")
	if err != nil {
		panic(err)
	}
	return d
}
