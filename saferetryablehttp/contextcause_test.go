package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/jarcoal/httpmock"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestContextCauseKept: a request whose context was canceled with a
// cause (context.WithCancelCause) before it was sent ends in a
// *saferetry.Error that matches both context.Canceled and the cause, as
// net/http's own error would, and as the Transport's does.
func TestContextCauseKept(t *testing.T) {
	errShutdown := errors.New("shutting down")
	rc := testkit.NewRecorder(testkit.Status(http.StatusCreated))
	c := newRetryable(t, rc)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errShutdown)
	_, err := c.Do(rhReq(t, ctx, http.MethodPost, "x"))
	var e *saferetry.Error
	if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrNotSent) || !errors.Is(err, context.Canceled) || !errors.Is(err, errShutdown) {
		t.Errorf("Do: %v; want a *saferetry.Error, not sent, matching context.Canceled and the cause", err)
	}
	if n := len(rc.Seen()); n != 0 {
		t.Errorf("%d attempts sent, want none", n)
	}
}

// TestContextCauseKeptDuringAttempt: a request whose context is canceled
// with a cause while an attempt is in flight, which net/http then fails
// with the cause alone, ends in a *saferetry.Error that matches both
// context.Canceled and the cause, as the Transport's does (errors.Is(err,
// context.Canceled) is how most callers tell a cancel).
func TestContextCauseKeptDuringAttempt(t *testing.T) {
	errShutdown := errors.New("shutting down")
	c := newRetryable(t, testkit.NewRecorder(testkit.Status(http.StatusCreated)))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	httpmock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		cancel(errShutdown)
		return nil, context.Cause(r.Context()) // as net/http reports it
	})
	_, err := c.Do(rhReq(t, ctx, http.MethodPost, "x"))
	var e *saferetry.Error
	if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) || !errors.Is(err, errShutdown) {
		t.Errorf("Do: %v; want a *saferetry.Error, outcome unknown, matching context.Canceled and the cause", err)
	}
}
