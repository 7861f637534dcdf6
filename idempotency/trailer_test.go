package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ops", strings.NewReader(`{}`))
	req.Header.Set(idempotency.HeaderIdempotencyKey, "k-trailer")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body) // trailers arrive after the body
	if err != nil || resp.StatusCode != http.StatusCreated || string(body) != "paid" {
		t.Fatalf("first answer: %d %q %v", resp.StatusCode, body, err)
	}
	if got := resp.Trailer.Get("X-Checksum"); got != "c0ffee" {
		t.Errorf("trailer X-Checksum = %q, want c0ffee", got)
	}
	if got := resp.Header.Values("X-Checksum"); len(got) != 0 {
		t.Errorf("X-Checksum %q in the header section; a declared trailer goes out only after the body", got)
	}
}
