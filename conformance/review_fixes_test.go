package conformance_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestInterruptedRunWithCountURLIsInterrupted: Run's doc says that when
// ctx ends first, the error's cause is ErrInterrupted and it matches ctx's
// error. With a CountURL, the count is read before the first request: a
// context that ended before it must not make the target unreachable.
func TestInterruptedRunWithCountURLIsInterrupted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Write([]byte("[]"))
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	target := conformance.Target{URL: srv.URL + "/payments", Body: []byte(body), Name: "pay"}
	_, err := (&conformance.Checker{CountURL: srv.URL + "/payments"}).Run(ctx, target)
	var ce *conformance.Error
	if !errors.As(err, &ce) || ce.Target != "pay" {
		t.Fatalf("Run with an ended context: %v (%T), want a *conformance.Error naming pay", err, err)
	}
	if !errors.Is(err, conformance.ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Errorf("Run with an ended context and a CountURL: %v (cause %v), want ErrInterrupted and context.Canceled", err, ce.Cause)
	}
	if errors.Is(err, conformance.ErrUnreachable) {
		t.Errorf("Run with an ended context and a CountURL: %v, want not ErrUnreachable", err)
	}
}
