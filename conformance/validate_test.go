package conformance_test

import (
	"context"
	"errors"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestInvalidMethodRefused: a method that is not an HTTP token is a
// configuration error, refused by Run and Plan before anything is sent,
// not a target Run cannot reach.
func TestInvalidMethodRefused(t *testing.T) {
	c := &conformance.Checker{}
	for _, m := range []string{"BAD METHOD", "POST\r\nX: y", "GET/"} {
		target := conformance.Target{Method: m, URL: "http://127.0.0.1:9/p", Body: []byte(body)}
		if _, err := c.Run(context.Background(), target); !errors.Is(err, conformance.ErrInvalid) || errors.Is(err, conformance.ErrUnreachable) {
			t.Errorf("Run with method %q: %v, want ErrInvalid", m, err)
		}
		if _, err := c.Plan(target); !errors.Is(err, conformance.ErrInvalid) {
			t.Errorf("Plan with method %q: %v, want ErrInvalid", m, err)
		}
	}
	if _, err := c.Plan(conformance.Target{Method: "PROPFIND", URL: "http://127.0.0.1:9/p"}); err != nil {
		t.Errorf("Plan with method PROPFIND: %v", err)
	}
}
