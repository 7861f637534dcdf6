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
			writeHandlerAnswer(w)
			panic("boom")
		}
		return 0
	}
	srv := recovering(t, idempotency.Middleware(newStore(t))(app))
	resp, body, err := sendRecovered(t, srv)
	wantRecoveryAnswer(t, resp, body, err)
	resp, body, err = sendRecovered(t, srv)
	if err != nil || resp.StatusCode != http.StatusCreated || app.calls.Load() != 2 || resp.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("retry: %v %v %q after %d runs; want the handler run again", err, resp, body, app.calls.Load())
	}
}

// TestPanicAfterTheHandlerLeavesOnlyOuterHeaders: a handler that set its
// headers and buffered its answer returned, and then something the
// Middleware calls before the answer goes out panicked (the store's
// Complete or Commit, a logger). Nothing was sent; a recovery handler
// around the Middleware answers instead, and that answer must carry the
// headers set before the handler ran and none of the handler's, as after
// a panic in the handler itself (TestPanicLeavesOnlyOuterHeaders): its
// Content-Length framed a body that is not sent. A hook's panic on the
// event comes after the outcome was recorded and reported: the handler's
// answer, which a retry would get as a replay, goes out whole, with its
// headers, as the event said (TestHookPanicAnswerIsTheEvents), and the
// recovery's answer comes too late.
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
		// hook: a hook panics, after the outcome was recorded and its
		// event given: the handler's answer goes out.
		hook bool
	}{
		{"lease mode, Complete panics", panickingComplete, nil, false},
		{"lease mode, hook panics", func(t *testing.T) idempotency.Store { return newStore(t) }, []idempotency.Option{panickingHook}, true},
		{"transactional mode, Commit panics", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), panicCommit: true}
		}, nil, false},
		{"transactional mode, hook panics", func(t *testing.T) idempotency.Store { return &fakeTxStore{Store: newStore(t)} },
			[]idempotency.Option{panickingHook}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mw := idempotency.Middleware(c.store(t), c.opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeHandlerAnswer(w)
			}))
			resp, body, err := sendRecovered(t, recovering(t, mw))
			if !c.hook {
				wantRecoveryAnswer(t, resp, body, err)
				return
			}
			if err != nil || resp.StatusCode != http.StatusCreated || body != strings.Repeat("x", 64) || resp.Header.Get("Location") != "/ops/1" {
				t.Errorf("answer: %v %v %q, want the handler's 201 whole, with its Location", err, resp, body)
			}
		})
	}
}

// writeHandlerAnswer sets the headers a handler's answer carries (a
// cookie, a Location, a Content-Length, X-Outer over the outer handler's)
// and writes its 201 and the 64 bytes its Content-Length frames.
func writeHandlerAnswer(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Set-Cookie", "session=handler")
	h.Set("Location", "/ops/1")
	h.Set("Content-Length", "64")
	h.Set("X-Outer", "handler")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, strings.Repeat("x", 64))
}

// recovering serves mw behind a handler that sets X-Outer before it and
// answers a panic with a 500 "internal error", as a recovery middleware
// does; the server is closed when t ends.
func recovering(t *testing.T, mw http.Handler) *httptest.Server {
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
	t.Cleanup(srv.Close)
	return srv
}

// sendRecovered POSTs {} with the key k-panic to srv on a connection of
// its own and returns the answer and as much of its body as arrived.
func sendRecovered(t *testing.T, srv *httptest.Server) (*http.Response, string, error) {
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

// wantRecoveryAnswer checks that the answer is the recovery's 500, whole,
// with the outer handler's X-Outer alone and none of the handler's
// Set-Cookie and Location.
func wantRecoveryAnswer(t *testing.T, resp *http.Response, body string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("the recovery's answer did not arrive whole: %v (body so far %q)", err, body)
	}
	if resp.StatusCode != http.StatusInternalServerError || body != "internal error" {
		t.Errorf("answer: %d %q, want the recovery's 500", resp.StatusCode, body)
	}
	if got := resp.Header.Values("X-Outer"); len(got) != 1 || got[0] != "outer" {
		t.Errorf("X-Outer = %q, want the outer handler's value alone", got)
	}
	if c, l := resp.Header.Get("Set-Cookie"), resp.Header.Get("Location"); c != "" || l != "" {
		t.Errorf("the handler's headers went with the recovery's answer: Set-Cookie %q, Location %q", c, l)
	}
}
