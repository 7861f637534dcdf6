package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestRetryableCrossOriginRedirectRefused: a 307 to another origin would
// resend the body and key there; the hop is not sent, not retried, and the
// error says why, with the key.
func TestRetryableCrossOriginRedirectRefused(t *testing.T) {
	rc := testkit.NewRecorder(testkit.StatusH(http.StatusTemporaryRedirect, "Location", "http://elsewhere.test/v2/debits"), testkit.Status(201))
	c := newRetryable(t, rc)
	_, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "card 4242"))
	var e *saferetry.Error
	if !errors.Is(err, saferetry.ErrCrossOriginRedirect) || !errors.Is(err, saferetry.ErrNotSent) || !errors.As(err, &e) {
		t.Fatalf("err = %v, want ErrCrossOriginRedirect (ErrNotSent)", err)
	}
	s := rc.Seen()
	if len(s) != 1 || len(s[0].Keys) != 1 || e.Key != s[0].Keys[0] {
		t.Fatalf("round trips %+v, error key %q: want only the first hop, and its key in the error", s, e.Key)
	}
}

// TestRetryableCrossOriginRedirectWithoutBody: the GET after a 303 goes to
// the other origin without the key; with WithCrossOriginRedirects a 308
// takes the key and body along.
func TestRetryableCrossOriginRedirectWithoutBody(t *testing.T) {
	rc := testkit.NewRecorder(testkit.StatusH(http.StatusSeeOther, "Location", "http://cdn.test/receipts/7"), testkit.Status(200))
	resp, err := newRetryable(t, rc).Do(rhReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := rc.Seen(); len(s) != 2 || len(s[0].Keys) != 1 || len(s[1].Keys) != 0 {
		t.Fatalf("round trips %+v, want the GET elsewhere without a key", s)
	}

	rc = testkit.NewRecorder(testkit.StatusH(http.StatusPermanentRedirect, "Location", "http://elsewhere.test/v2/debits"), testkit.Status(201))
	resp, err = newRetryable(t, rc, WithCrossOriginRedirects(true)).Do(rhReq(t, context.Background(), http.MethodPost, "card 4242"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := rc.Seen(); len(s) != 2 || len(s[1].Keys) != 1 || s[1].Keys[0] != s[0].Keys[0] || s[1].Body != "card 4242" {
		t.Fatalf("round trips %+v, want the key and body followed", s)
	}
}
