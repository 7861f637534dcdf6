package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestContentLengthOverHTTP2ReplaysAWholeAnswer: over HTTP/2, net/http's
// writer sends the first value of a handler's Content-Length when it is
// digits only, and none otherwise: the other values, and a value with a
// sign, never reach the client, which reads the body by its frames. So an
// answer under several Content-Length values that differ, or under one
// with a sign, reaches an HTTP/2 client whole (with the first value's
// length, or the length of the body), and a retry must get its replay,
// not 410 for an answer taken as cut short, as over HTTP/1.1.
func TestContentLengthOverHTTP2ReplaysAWholeAnswer(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		body   string
	}{
		{"several values", []string{"5", "6"}, "abcde"},
		{"with a sign", []string{"+3"}, "abc"},
		{"with a sign, shorter", []string{"+3"}, "ab"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Length"] = c.values
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, c.body)
			}))
			srv := httptest.NewUnstartedServer(h)
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close)
			do := func() (*http.Response, string) {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
				req.Header.Set(idempotency.HeaderIdempotencyKey, "k-h2")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("body over %s: %v", resp.Proto, err)
				}
				return resp, string(b)
			}
			first, fb := do()
			if first.ProtoMajor != 2 || first.StatusCode != http.StatusCreated || fb != c.body {
				t.Fatalf("first answer over %s: %d %q; want 201 %q over HTTP/2", first.Proto, first.StatusCode, fb, c.body)
			}
			again, ab := do()
			if again.StatusCode != http.StatusCreated || ab != c.body || again.Header.Get(idempotency.HeaderReplayed) != "true" {
				t.Errorf("retry of a whole first answer: %d %q (replayed %q); want the replay, 201 %q",
					again.StatusCode, ab, again.Header.Get(idempotency.HeaderReplayed), c.body)
			}
		})
	}
}
