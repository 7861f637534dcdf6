package idempotency_test

import (
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// A handler that sets Content-Type to nil (net/http's way to send no type
// and sniff none) answers without one; its replay must not gain one that
// net/http sniffed from the body (here text/html).
func TestReplayKeepsAContentTypeSetToNil(t *testing.T) {
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("<html>opaque bytes"))
	}))
	do := overWire(t, h) // net/http's own writer sniffs
	first, fb := do("k-ct")
	again, ab := do("k-ct")
	if again.Header.Get(idempotency.HeaderReplayed) != "true" || again.StatusCode != first.StatusCode || ab != fb {
		t.Fatalf("not a replay: %d %q %v", again.StatusCode, ab, again.Header)
	}
	if got := again.Header.Values("Content-Type"); len(first.Header.Values("Content-Type")) != 0 || len(got) != 0 {
		t.Errorf("Content-Type %q on the replay, %q on the first answer: want none on either", got, first.Header.Values("Content-Type"))
	}
}
