package saferetryablehttp

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestRetryPaidOnceWhenRefilledMeanwhile: a retry costs its price once,
// even when the bucket refills to capacity between the decision that
// paid it and retryablehttp's drain of the answer (which closes it, and
// then calls Backoff): another request of the client that succeeds
// meanwhile (here from a ResponseLogHook) leaves the bucket as it would
// be had the retry been paid once, as with the Transport. A budget of 2
// at cost 1: after a 503 retried into a final 501, with a success in
// between, the bucket is full again and pays the next request's two
// retries.
func TestRetryPaidOnceWhenRefilledMeanwhile(t *testing.T) {
	rc := testkit.NewRecorder(
		testkit.Status(http.StatusServiceUnavailable), // the request's first attempt
		testkit.Status(http.StatusOK),                 // the other request, from the hook
		testkit.Status(http.StatusNotImplemented),     // the retry: final, refills nothing
	)
	c := newRetryable(t, rc, WithRetryBudget(2, 1), WithMaxAttempts(3))
	var once atomic.Bool
	c.ResponseLogHook = func(_ retryablehttp.Logger, resp *http.Response) {
		if resp.StatusCode != http.StatusServiceUnavailable || !once.CompareAndSwap(false, true) {
			return
		}
		mustDo(t, c, rhReq(t, context.Background(), http.MethodGet, ""))
	}
	resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
	if n := len(rc.Seen()); resp.StatusCode != http.StatusNotImplemented || n != 3 {
		t.Fatalf("status %d after %d round trips, want 501 after 3", resp.StatusCode, n)
	}
	wantTwoRetries(t, c, rc)
}
