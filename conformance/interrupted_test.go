package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestInterruptedRunNamesItsTarget: a Run whose context ends before it
// could check anything returns an *Error that names its target, with the
// cause ErrInterrupted and the context's error, so that -json and -junit
// say which target was not checked and why. It was the bare context
// error: "errors" held an entry without a target.
func TestInterruptedRunNamesItsTarget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	target := conformance.Target{URL: srv.URL + "/payments", Body: []byte(body), Name: "pay"}
	_, err := (&conformance.Checker{}).Run(ctx, target)
	var ce *conformance.Error
	if !errors.As(err, &ce) || ce.Target != "pay" {
		t.Fatalf("Run with an ended context: %v (%T), want a *conformance.Error naming pay", err, err)
	}
	if !errors.Is(err, conformance.ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Errorf("Run with an ended context: %v, want ErrInterrupted and context.Canceled", err)
	}
	if errors.Is(err, conformance.ErrUnreachable) || errors.Is(err, conformance.ErrInvalid) {
		t.Errorf("Run with an ended context: %v, want neither ErrUnreachable nor ErrInvalid", err)
	}
	var out bytes.Buffer
	if err := conformance.WriteJSON(&out, nil, err); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Errors []struct{ Target, Error string }
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Errors) != 1 || doc.Errors[0].Target != "pay" {
		t.Errorf("WriteJSON: %s (%v), want one error for target pay", out.Bytes(), err)
	}
}

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
