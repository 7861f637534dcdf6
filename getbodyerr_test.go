package saferetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestGetBodyErrorKept: a retry vetoed because the request's GetBody
// failed ends the operation with the attempt's outcome and
// ReasonBodyNotReplayable; when that outcome is an error, the *Error
// holds GetBody's error next to the attempt's, so that the caller learns
// why the body could not be sent again, as errors.Is finds both. The
// hook's Attempt.Err stays the attempt's own.
func TestGetBodyErrorKept(t *testing.T) {
	errGone := errors.New("spool file gone")
	tr, _, hl := testTransport(testkit.NewRecorder(testkit.Fail(testkit.ErrReset)))
	req := newReq(t, context.Background(), http.MethodPost, "x")
	req.GetBody = func() (io.ReadCloser, error) { return nil, errGone }
	req.Body = io.NopCloser(strings.NewReader("x"))
	_, err := tr.RoundTrip(req)
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonBodyNotReplayable || e.Attempts != 1 {
		t.Fatalf("RoundTrip: %v; want a *saferetry.Error after 1 attempt, %q", err, ReasonBodyNotReplayable)
	}
	if !errors.Is(err, testkit.ErrReset) || !errors.Is(err, errGone) {
		t.Errorf("RoundTrip: %v; want it to match the attempt's error and GetBody's", err)
	}
	if as := hl.Attempts(); len(as) != 1 || !errors.Is(as[0].Err, testkit.ErrReset) || errors.Is(as[0].Err, errGone) {
		t.Errorf("attempts %+v; want one, whose Err is the attempt's alone", as)
	}
}
