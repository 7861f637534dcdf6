package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/internal/testkit"
)

// bodyTimeout is the error of a body read that http.Client.Timeout cut, as
// net/http reports it: a timeout.
type bodyTimeout struct{}

func (bodyTimeout) Error() string {
	return "context deadline exceeded (Client.Timeout or context cancellation while reading body)"
}
func (bodyTimeout) Timeout() bool { return true }

// TestResponseHandlerErrorIsFinal: the error of a request's
// ResponseHandler, which retryablehttp gives CheckRetry along with the
// answer the request got, is not a round trip's, and ends the request as
// it is, a timeout too (the handler's read of the body cut by
// http.Client.Timeout). A timeout was taken for the attempt's own and the
// request, answered, was sent again.
func TestResponseHandlerErrorIsFinal(t *testing.T) {
	for _, herr := range []error{errors.New("unexpected body"), bodyTimeout{}} {
		t.Run(herr.Error(), func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(http.StatusCreated))
			c := newRetryable(t, rc)
			req := rhReq(t, context.Background(), http.MethodPost, "x")
			req.SetResponseHandler(func(*http.Response) error { return herr })
			resp, err := c.Do(req)
			if resp != nil || !errors.Is(err, herr) || len(rc.Seen()) != 1 {
				t.Fatalf("resp %v, err %v after %d attempts; want the handler's error after 1", resp, err, len(rc.Seen()))
			}
			if b := rc.Bodies(); !b[0].Closed() {
				t.Error("the answer's body was left open")
			}
		})
	}
}

// TestResponseHandlerAnswerRefillsOnce: retryablehttp asks CheckRetry a
// second time about an answer it hands to the request's ResponseHandler
// (with the handler's error, nil when it accepts the answer); that is
// still one answer, which refills the retry budget once. It refilled it
// twice, minting a token: of a budget of 3 at cost 1 drained by a
// failing request, the next request's answer gave back 2 where 1 is
// due, and the request after it got a second retry.
func TestResponseHandlerAnswerRefillsOnce(t *testing.T) {
	unavailable := testkit.Status(http.StatusServiceUnavailable)
	rc := testkit.NewRecorder(unavailable, unavailable, unavailable, unavailable)
	c := newRetryable(t, rc, WithRetryBudget(3, 1), WithMaxAttempts(10))
	if resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x")); resp.StatusCode != http.StatusServiceUnavailable || len(rc.Seen()) != 4 {
		t.Fatalf("draining request: status %d after %d attempts, want 503 after 4", resp.StatusCode, len(rc.Seen()))
	}
	rc.Restart(testkit.Status(http.StatusCreated))
	req := rhReq(t, context.Background(), http.MethodPost, "x")
	req.SetResponseHandler(func(*http.Response) error { return nil })
	mustDo(t, c, req)
	rc.Restart(unavailable, unavailable, testkit.Status(http.StatusCreated))
	resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
	if resp.StatusCode != http.StatusServiceUnavailable || len(rc.Seen()) != 2 {
		t.Fatalf("next request: status %d after %d attempts, want 503 after 2 (one token: one retry)", resp.StatusCode, len(rc.Seen()))
	}
}
