package testkit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// ExecuteThenGoDown starts a server that answers a GET with "ok" (to leave
// a keep-alive connection behind) and, for any other request, counts an
// execution, closes its listener and drops the connection without an
// answer: a server that did the work and went down before it answered, so
// that a re-dial of the same address is refused. It returns the server's
// URL and the count; the server is closed when t ends.
func ExecuteThenGoDown(t testing.TB) (url string, executed *atomic.Int32) {
	executed = new(atomic.Int32)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, "ok")
			return
		}
		executed.Add(1)      // the work is done...
		srv.Listener.Close() // ...and the server goes down before it answers
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, executed
}

// CountingServer starts a server that answers every request 201 and counts
// them, for tests that check what reached it. The server is closed when t
// ends.
func CountingServer(t testing.TB) (url string, requests *atomic.Int32) {
	requests = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, requests
}
