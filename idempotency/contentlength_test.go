package idempotency_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestReplayOfALargeBodyCarriesItsContentLength: net/http's writer adds a
// Content-Length by itself only to a body that fits its few-KiB buffer,
// and sends a larger one chunked. A handler that sets the Content-Length
// of its 5000-byte answer has it on the first answer; the replay, whose
// body is known whole, must carry it too, not go out chunked without one.
func TestReplayOfALargeBodyCarriesItsContentLength(t *testing.T) {
	body := strings.Repeat("p", 5000)
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	}))
	do := overWire(t, h)
	first, fb := do("k-length")
	again, ab := do("k-length")
	if fb != body || ab != body {
		t.Fatalf("bodies of %d and %d bytes; want the handler's %d bytes", len(fb), len(ab), len(body))
	}
	if again.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("second answer is not a replay: %v", again.Header)
	}
	if first.ContentLength != int64(len(body)) || again.ContentLength != first.ContentLength {
		t.Errorf("Content-Length %d on the first answer, %d on the replay (transfer encoding %q); want %d on both",
			first.ContentLength, again.ContentLength, again.TransferEncoding, len(body))
	}
}
