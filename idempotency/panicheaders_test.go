package idempotency_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestPanicLeavesOnlyOuterHeaders: a handler that set its headers and
// wrote its answer into the Middleware's buffer, then panicked, sent
// nothing; a recovery handler around the Middleware answers instead. That
// answer must carry the headers set before the handler ran and none of the
// handler's: not its Set-Cookie or Location, and not its Content-Length,
// which framed a body that is not sent, so that the client read the
// recovery's 500 as a broken message (unexpected EOF). The claim is
// released: the retry runs the handler again.
func TestPanicLeavesOnlyOuterHeaders(t *testing.T) {
	app := &counter{}
	app.before = func(w http.ResponseWriter, r *http.Request) int {
		if app.calls.Load() == 1 {
			h := w.Header()
			h.Set("Set-Cookie", "session=handler")
			h.Set("Location", "/ops/1")
			h.Set("Content-Length", "64")
			h.Set("X-Outer", "handler")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, strings.Repeat("x", 64))
			panic("boom")
		}
		return 0
	}
	mw := idempotency.Middleware(newStore(t))(app)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Outer", "outer")
		defer func() {
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, "internal error")
			}
		}()
		mw.ServeHTTP(w, r)
	}))
	defer srv.Close()

	send := func() (*http.Response, string, error) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/ops", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(idempotency.HeaderIdempotencyKey, "k-panic")
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}
	resp, body, err := send()
	if err != nil {
		t.Fatalf("the recovery's answer did not arrive whole: %v (body so far %q)", err, body)
	}
	if resp.StatusCode != http.StatusInternalServerError || body != "internal error" {
		t.Errorf("first answer: %d %q, want the recovery's 500", resp.StatusCode, body)
	}
	if got := resp.Header.Values("X-Outer"); len(got) != 1 || got[0] != "outer" {
		t.Errorf("X-Outer = %q, want the outer handler's value alone", got)
	}
	if c, l := resp.Header.Get("Set-Cookie"), resp.Header.Get("Location"); c != "" || l != "" {
		t.Errorf("the panicking handler's headers went with the recovery's answer: Set-Cookie %q, Location %q", c, l)
	}
	resp, body, err = send()
	if err != nil || resp.StatusCode != http.StatusCreated || app.calls.Load() != 2 || resp.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("retry: %v %v %q after %d runs; want the handler run again", err, resp, body, app.calls.Load())
	}
}

// TestPanicAfterTheHandlerLeavesOnlyOuterHeaders: a handler that set its
// headers and buffered its answer returned, and then something the
// Middleware calls before the answer goes out panicked (the store's
// Complete or Commit, a hook, a logger). Nothing was sent; a recovery
// handler around the Middleware answers instead, and that answer must
// carry the headers set before the handler ran and none of the handler's,
// as after a panic in the handler itself (TestPanicLeavesOnlyOuterHeaders):
// its Content-Length framed a body that is not sent.
func TestPanicAfterTheHandlerLeavesOnlyOuterHeaders(t *testing.T) {
	panickingComplete := func(t *testing.T) idempotency.Store {
		return &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
			panic("store bug")
		}}
	}
	panickingHook := idempotency.WithHook(func(e idempotency.Event) {
		if e.Outcome == idempotency.OutcomeNew {
			panic("metrics bug")
		}
	})
	cases := []struct {
		name  string
		store func(t *testing.T) idempotency.Store
		opts  []idempotency.Option
	}{
		{"lease mode, Complete panics", panickingComplete, nil},
		{"lease mode, hook panics", func(t *testing.T) idempotency.Store { return newStore(t) }, []idempotency.Option{panickingHook}},
		{"transactional mode, Commit panics", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), panicCommit: true}
		}, nil},
		{"transactional mode, hook panics", func(t *testing.T) idempotency.Store { return &fakeTxStore{Store: newStore(t)} },
			[]idempotency.Option{panickingHook}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mw := idempotency.Middleware(c.store(t), c.opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h := w.Header()
				h.Set("Set-Cookie", "session=handler")
				h.Set("Location", "/ops/1")
				h.Set("Content-Length", "64")
				h.Set("X-Outer", "handler")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, strings.Repeat("x", 64))
			}))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Outer", "outer")
				defer func() {
					if p := recover(); p != nil {
						w.WriteHeader(http.StatusInternalServerError)
						_, _ = io.WriteString(w, "internal error")
					}
				}()
				mw.ServeHTTP(w, r)
			}))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ops", strings.NewReader(`{}`))
			req.Header.Set(idempotency.HeaderIdempotencyKey, "k-panic")
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("the recovery's answer did not arrive whole: %v (body so far %q)", err, b)
			}
			if resp.StatusCode != http.StatusInternalServerError || string(b) != "internal error" {
				t.Errorf("answer: %d %q, want the recovery's 500", resp.StatusCode, b)
			}
			if got := resp.Header.Values("X-Outer"); len(got) != 1 || got[0] != "outer" {
				t.Errorf("X-Outer = %q, want the outer handler's value alone", got)
			}
			if c, l := resp.Header.Get("Set-Cookie"), resp.Header.Get("Location"); c != "" || l != "" {
				t.Errorf("the handler's headers went with the recovery's answer: Set-Cookie %q, Location %q", c, l)
			}
		})
	}
}
