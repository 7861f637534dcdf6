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

// TestDeclaredTrailerIsNotStored: a declared trailer whose name is on the
// replay allow-list (an ETag computed over the body, sent after it) went
// to the first client as a trailer only, but was stored with the headers
// and replayed in the header section: the replay differed from the first
// answer, and the package documentation says trailers are not stored.
func TestDeclaredTrailerIsNotStored(t *testing.T) {
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "etag, X-Checksum")
		w.Header().Set("Location", "/ops/1")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "paid")
		w.Header().Set("ETag", `"c0ffee"`)
	}))
	send := overWire(t, h)
	resp, body := send("k-etag-trailer")
	if resp.StatusCode != http.StatusCreated || body != "paid" || resp.Trailer.Get("ETag") != `"c0ffee"` || resp.Header.Get("ETag") != "" {
		t.Fatalf("first answer: %d %q, header %v, trailer %v; want ETag as a trailer only", resp.StatusCode, body, resp.Header, resp.Trailer)
	}
	resp, body = send("k-etag-trailer")
	if resp.Header.Get(idempotency.HeaderReplayed) != "true" || body != "paid" || resp.Header.Get("Location") != "/ops/1" {
		t.Fatalf("retry: %d %q, header %v; want the replay with its Location", resp.StatusCode, body, resp.Header)
	}
	if got := resp.Header.Values("ETag"); len(got) != 0 {
		t.Errorf("replay carries ETag %q in its header section; the first answer sent it only as a trailer", got)
	}
}
