package otelsaferetry_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestRefusedAttemptErrorType: an attempt that net/http refuses before
// sending anything (an invalid header value) has error.type
// saferetry.refused on its client span and its event, not the Go type of
// the wrapper that marks it (*fmt.wrapErrors), which tells an operator
// nothing.
func TestRefusedAttemptErrorType(t *testing.T) {
	r := newRig(t)
	s := newScript(t, http.StatusCreated)
	rt := otelsaferetry.NewTransport(nil, r.options()...)
	req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(`{}`))
	req.Header["X-Bad"] = []string{"a\nb"}
	_, err := rt.RoundTrip(req)
	if !errors.Is(err, saferetry.ErrNotSent) {
		t.Fatalf("err %v, want ErrNotSent", err)
	}
	var attempts, events int
	for _, sp := range r.spans.Ended() {
		if v, ok := attr(sp, semconv.ErrorTypeKey); ok && sp.Name() == "POST" && sp.Parent().IsValid() {
			attempts++
			if v.AsString() != "saferetry.refused" {
				t.Errorf("attempt span error.type %q, want saferetry.refused", v.AsString())
			}
		}
		for _, ev := range sp.Events() {
			for _, kv := range ev.Attributes {
				if kv.Key == semconv.ErrorTypeKey {
					events++
					if kv.Value.AsString() != "saferetry.refused" {
						t.Errorf("event %q error.type %q, want saferetry.refused", ev.Name, kv.Value.AsString())
					}
				}
			}
		}
	}
	if attempts+events == 0 {
		t.Fatalf("no span or event of the attempt has an error.type; spans: %d", len(r.spans.Ended()))
	}
}
