package saferetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestCutErrorBodyIsReported: a final 422 problem whose body the server's
// death cuts half-way. Client.Do reports the status with the key, the part
// of the body it got, and the read error that cut it, so that a caller can
// tell a cut document from a whole one (and ask again with the key for the
// stored answer) rather than take half a document for the server's.
func TestCutErrorBodyIsReported(t *testing.T) {
	leaks := checkLeaks(t)
	r := newCutRig(t, testkit.CutErrorBody, false)
	resp, err := r.do(context.Background(), true, "/pay", "debit 1500")
	if resp != nil {
		resp.Body.Close()
		t.Fatalf("got a %d answer, want an *APIError", resp.StatusCode)
	}
	key := testkit.OneKey(t, r.keys(), 1)
	var ae *saferetry.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want an *APIError", err)
	}
	if ae.StatusCode != http.StatusUnprocessableEntity || ae.Key != key || ae.Attempts != 1 || ae.Problem != nil ||
		string(ae.Body) != testkit.CutProblem[:len(testkit.CutProblem)/2] {
		t.Errorf("got %+v, want the 422 with key %q, half the problem and no Problem", ae, key)
	}
	if !errors.Is(ae.BodyErr, io.ErrUnexpectedEOF) {
		t.Errorf("APIError.BodyErr = %v, want io.ErrUnexpectedEOF: the body was cut", ae.BodyErr)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, saferetry.ErrOutcomeUnknown) {
		t.Errorf("the APIError %v matches the read error or ErrOutcomeUnknown; the status is known", err)
	}
	if !strings.Contains(err.Error(), "body cut short") {
		t.Errorf("the APIError reads %q; want it to say that the body was cut short", err)
	}
	leaks(r)
}
