package saferetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestContextCauseKept: an operation whose context is canceled with a
// cause (context.WithCancelCause) ends in an *Error that matches both
// context.Canceled and the cause, whenever the cancel lands: before the
// first attempt, during the wait before a retry, during an attempt
// (where net/http's own error is the cause), or while a body without
// GetBody is buffered. net/http reports the cause;
// the Transport reported it only from an attempt, dropped it when the
// context ended between attempts, and reported it alone, without
// context.Canceled, when the context ended the buffering of the body.
func TestContextCauseKept(t *testing.T) {
	errShutdown := errors.New("shutting down")
	for _, when := range []string{"before the first attempt", "during the wait", "during an attempt", "while the body is read"} {
		t.Run(when, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			clk := newFakeClock()
			clk.hold = true
			clk.armed = make(chan time.Duration, 1)
			rc := testkit.NewRecorder(testkit.Status(http.StatusServiceUnavailable))
			base := http.RoundTripper(mockBase(rc))
			switch when {
			case "before the first attempt":
				cancel(errShutdown)
			case "during the wait":
				go func() { <-clk.armed; cancel(errShutdown) }()
			case "during an attempt":
				base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
					cancel(errShutdown)
					return nil, context.Cause(r.Context())
				})
			}
			req := newReq(t, ctx, http.MethodPost, "x")
			if when == "while the body is read" {
				// A body without GetBody is buffered first, under the
				// context: one that never ends stops at its end.
				pr, pw := io.Pipe()
				defer pw.Close()
				req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/debits", pr)
				cancel(errShutdown)
			}
			tr := NewTransport(base, withClock(clk), WithBackoff(constBackoff(time.Hour)))
			_, err := tr.RoundTrip(req)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, context.Canceled) || !errors.Is(err, errShutdown) {
				t.Errorf("RoundTrip: %v; want a *saferetry.Error matching context.Canceled and the cause", err)
			}
		})
	}
}
