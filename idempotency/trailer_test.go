package idempotency_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestDeclaredTrailerGoesOutOnlyAsATrailer: a handler that declares a
// trailer (Trailer: X-Checksum) and sets its value after writing the body
// sends it, through net/http's own writer, at the end of the body and not
// in the header section. The Middleware sends the buffered answer after
// the handler returned, when the value is in the header map already: the
// first answer must still carry it as a trailer only, as without the
// Middleware. Replays carry no trailer (stores keep none; see the package
// documentation).
func TestDeclaredTrailerGoesOutOnlyAsATrailer(t *testing.T) {
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "paid")
		w.Header().Set("X-Checksum", "c0ffee")
	}))
	resp, body := overWire(t, h)("k-trailer") // trailers arrive after the body
	if resp.StatusCode != http.StatusCreated || body != "paid" {
		t.Fatalf("first answer: %d %q", resp.StatusCode, body)
	}
	if got := resp.Trailer.Get("X-Checksum"); got != "c0ffee" {
		t.Errorf("trailer X-Checksum = %q, want c0ffee", got)
	}
	if got := resp.Header.Values("X-Checksum"); len(got) != 0 {
		t.Errorf("X-Checksum %q in the header section; a declared trailer goes out only after the body", got)
	}
}
