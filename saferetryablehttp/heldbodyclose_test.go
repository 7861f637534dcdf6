package saferetryablehttp

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestStoppedAnswerClosedConcurrently: the answer that a CheckRetry of the
// caller's around Configure's kept from its retry may be closed from two
// goroutines at once, as net/http's bodies may (a reader's deferred Close
// beside a Close that a context's end makes to cut the read short): the
// retry's cost goes back once (run under -race: no data race), and the
// budget of 10 at cost 5 still pays the next request's two retries.
func TestStoppedAnswerClosedConcurrently(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(http.StatusServiceUnavailable))
	c := newRetryable(t, rc, WithRetryBudget(10, 5), WithMaxAttempts(4))
	inner := c.CheckRetry
	stop := true
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		retry, checkErr := inner(ctx, resp, err)
		if stop {
			return false, checkErr
		}
		return retry, checkErr
	}
	resp, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatalf("Do: %v, want the 503", err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { resp.Body.Close() })
	}
	wg.Wait()
	stop = false
	wantTwoRetries(t, c, rc)
}
