package scenario

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// instance is one application instance: an HTTP server with its own
// Middleware in front of the scenario's handler.
type instance struct {
	srv    *httptest.Server
	cancel context.CancelFunc // cancels every request context of srv
}

// startInstance serves h behind a Middleware over store. Cleanup stops it.
func startInstance(t *testing.T, store idempotency.Store, h http.Handler, opts []idempotency.Option) *instance {
	t.Helper()
	base, cancel := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(idempotency.Middleware(store, opts...)(h))
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	in := &instance{srv: srv, cancel: cancel}
	t.Cleanup(func() {
		cancel()
		srv.CloseClientConnections()
		srv.Close()
	})
	return in
}

// kill cuts the instance off as if its process died: every request context
// is cancelled and every client connection dropped. Handlers that ignore
// their context keep running until they return, like a frozen process that
// wakes up later.
func (in *instance) kill() {
	in.cancel()
	in.srv.CloseClientConnections()
}

// newHTTPClient returns a plain client that keeps enough idle connections
// for the scenarios' fan-out.
func newHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{
		MaxIdleConns:        400,
		MaxIdleConnsPerHost: 200,
		IdleConnTimeout:     30 * time.Second,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// postJSON sends one protected POST of body with the Idempotency-Key key to
// url and reads the whole answer.
func postJSON(ctx context.Context, client *http.Client, url, key, body string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderIdempotencyKey, key)
	resp, err := client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true",
		header: resp.Header, body: b, err: err}
}
