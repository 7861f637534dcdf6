package idempotency_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// postOnce sends a protected POST on a connection of its own (so that
// net/http's transport never retries it on a reused one) and returns the
// status and body, or the error of a response that did not arrive.
func postOnce(url, key string) (int, string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(`{"amount":1}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderIdempotencyKey, key)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		return resp.StatusCode, string(body), errors.New("not a replay")
	}
	return resp.StatusCode, string(body), nil
}

// wantStoredReplay fails unless a retry under key replays the stored 201
// of execution 1, and the handler ran once.
func wantStoredReplay(t *testing.T, url, key string, app *counter) {
	t.Helper()
	status, body, err := postOnce(url, key)
	if err != nil || status != http.StatusCreated || !strings.Contains(body, `"execution":1`) {
		t.Errorf("replay: %d %q %v; want the stored 201 of execution 1", status, body, err)
	}
	if n := app.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// setPast sets a connection deadline, through set (the ResponseController
// method named name), to a second ago; it reports whether that worked.
func setPast(t *testing.T, name string, set func(time.Time) error) bool {
	t.Helper()
	if err := set(time.Now().Add(-time.Second)); err != nil {
		t.Errorf("%s: %v", name, err)
		return false
	}
	return true
}

// The claim-time writer refuses, through http.ResponseController, what
// would send part of the answer before it is recorded (Flush, Hijack) or
// needs the request body still unread (EnableFullDuplex), while the
// HTTP/1.1 writer underneath supports them all.
func TestClaimWriterRefusesWhatWouldBypassTheRecord(t *testing.T) {
	store := newStore(t)
	app := &counter{before: func(w http.ResponseWriter, r *http.Request) int {
		rc := http.NewResponseController(w)
		if err := rc.Flush(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Flush: %v, want http.ErrNotSupported", err)
		}
		c, _, err := rc.Hijack()
		if c != nil {
			_ = c.Close()
		}
		if !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Hijack: %v, want http.ErrNotSupported", err)
		}
		if err := rc.EnableFullDuplex(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("EnableFullDuplex: %v, want http.ErrNotSupported", err)
		}
		if _, ok := w.(http.Flusher); ok {
			t.Error("the claim-time writer is an http.Flusher")
		}
		if _, ok := w.(http.Hijacker); ok {
			t.Error("the claim-time writer is an http.Hijacker")
		}
		return 0
	}}
	mw := idempotency.Middleware(store)(app)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The refusals above are the Middleware's: the real writer has them.
		_, f := w.(http.Flusher)
		_, h := w.(http.Hijacker)
		if !f || !h {
			t.Errorf("server writer: Flusher %v, Hijacker %v", f, h)
		}
		mw.ServeHTTP(w, r)
	}))
	defer srv.Close()
	if _, _, err := postOnce(srv.URL, "k-refuse"); err == nil || err.Error() != "not a replay" {
		t.Fatalf("first answer: %v", err)
	}
	wantStoredReplay(t, srv.URL, "k-refuse", app)
}

// A write deadline the handler sets reaches the connection: one already
// past makes the first answer fail to go out. The answer was stored all
// the same, and a retry replays it.
func TestClaimWriterPassesWriteDeadline(t *testing.T) {
	store := newStore(t)
	app := &counter{before: func(w http.ResponseWriter, r *http.Request) int {
		setPast(t, "SetWriteDeadline", http.NewResponseController(w).SetWriteDeadline)
		return 0
	}}
	srv := httptest.NewServer(idempotency.Middleware(store)(app))
	defer srv.Close()

	if status, body, err := postOnce(srv.URL, "k-write"); err == nil || err.Error() == "not a replay" {
		t.Fatalf("first answer arrived (%d %q) past its write deadline", status, body)
	}
	wantStoredReplay(t, srv.URL, "k-write", app)
}

// A read deadline the handler sets reaches the connection. The Middleware
// read the body already, so what it bounds is net/http's background read of
// the connection: one already past ends that read, and net/http cancels the
// request's context. The answer is stored as written.
func TestClaimWriterPassesReadDeadline(t *testing.T) {
	store := newStore(t)
	app := &counter{before: func(w http.ResponseWriter, r *http.Request) int {
		if !setPast(t, "SetReadDeadline", http.NewResponseController(w).SetReadDeadline) {
			return 0
		}
		bound := time.NewTimer(10 * time.Second) // a failure bound, not a wait
		defer bound.Stop()
		select {
		case <-r.Context().Done():
		case <-bound.C:
			t.Error("the read deadline did not end the connection's read")
		}
		return 0
	}}
	srv := httptest.NewServer(idempotency.Middleware(store)(app))
	defer srv.Close()

	_, _, _ = postOnce(srv.URL, "k-read") // the first answer may or may not arrive
	wantStoredReplay(t, srv.URL, "k-read", app)
}

// Over HTTP/2, where net/http's writer is an http.Pusher, the claim-time
// writer is not: a pushed response would not be part of the record.
func TestClaimWriterHidesPusher(t *testing.T) {
	store := newStore(t)
	app := &counter{before: func(w http.ResponseWriter, r *http.Request) int {
		if _, ok := w.(http.Pusher); ok {
			t.Error("the claim-time writer is an http.Pusher")
		}
		return 0
	}}
	mw := idempotency.Middleware(store)(app)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Pusher); !ok || r.ProtoMajor != 2 {
			t.Errorf("server writer over %s: Pusher %v; want HTTP/2 and true", r.Proto, ok)
		}
		mw.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(idempotency.HeaderIdempotencyKey, "k-push")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || app.calls.Load() != 1 {
		t.Errorf("status %d after %d runs, want 201 after 1", resp.StatusCode, app.calls.Load())
	}
}
