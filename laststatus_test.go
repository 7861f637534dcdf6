package saferetry

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestErrorKeepsAnEarlierStatus: an operation whose last attempt got no
// response, after an earlier attempt got an answer, ends in an *Error
// whose StatusCode is that answer's status, as its doc says ("the last
// response received"), whether it ends at the attempt limit or, as
// TestCancelInterruptsWait has it, during a wait.
func TestErrorKeepsAnEarlierStatus(t *testing.T) {
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		if n == 1 {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		}
		return nil, errors.New("connection reset")
	})
	tr := NewTransport(base, withClock(newFakeClock()), WithBackoff(constBackoff(10*time.Millisecond)), WithMaxAttempts(2))
	_, err := tr.RoundTrip(newReq(t, t.Context(), http.MethodPost, `{"amount":1500}`))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an *Error", err)
	}
	if n != 2 || e.Attempts != 2 || e.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%d attempts sent, the error says %d and status %d; want 2, 2 and 503", n, e.Attempts, e.StatusCode)
	}
}
