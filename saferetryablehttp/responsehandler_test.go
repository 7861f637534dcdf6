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
