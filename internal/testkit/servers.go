package testkit

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
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

// WarmUp leaves a keep-alive connection to url in base's pool, as a
// request of the same process would.
func WarmUp(t testing.TB, base http.RoundTripper, url string) {
	resp, err := (&http.Client{Transport: base}).Get(url)
	if err != nil {
		t.Error(err)
		return
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
}

// RefusedAddr returns a loopback address on which nothing listens (a free
// port, see testenv.FreePorts), so that a dial to it is refused.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(testenv.FreePorts(t, 1, false))
}

// SigningBase is a RoundTripper of a common kind, put between a client and
// net/http: it reads the body (to sign or log it) and sends Next a clone
// with a Body and a GetBody of its own, keeping the request's context.
type SigningBase struct{ Next http.RoundTripper }

func (s SigningBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return s.Next.RoundTrip(r)
	}
	buf, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(buf))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	r.Header.Set("X-Signature", "sig-of-body")
	return s.Next.RoundTrip(r)
}

// RegisteredSigning returns a net/http Transport in which a SigningBase
// over next is registered for "http": net/http hands it every http
// request, as it is.
func RegisteredSigning(next *http.Transport) http.RoundTripper {
	t := &http.Transport{}
	t.RegisterProtocol("http", SigningBase{Next: next})
	return t
}
