package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	srv := httptest.NewServer(h) // net/http's own writer sniffs
	defer srv.Close()
	do := func() (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ops", strings.NewReader(`{}`))
		req.Header.Set(idempotency.HeaderIdempotencyKey, "k-ct")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	first, fb := do()
	again, ab := do()
	if again.Header.Get(idempotency.HeaderReplayed) != "true" || again.StatusCode != first.StatusCode || ab != fb {
		t.Fatalf("not a replay: %d %q %v", again.StatusCode, ab, again.Header)
	}
	if got := again.Header.Values("Content-Type"); len(first.Header.Values("Content-Type")) != 0 || len(got) != 0 {
		t.Errorf("Content-Type %q on the replay, %q on the first answer: want none on either", got, first.Header.Values("Content-Type"))
	}
}
