package idempotency_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// completeCapture is a Store that notes the Header of the last Response
// handed to Complete, as it was during the call. It is safe for
// concurrent use.
type completeCapture struct {
	idempotency.Store
	mu  sync.Mutex
	got http.Header
}

func (c *completeCapture) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	c.mu.Lock()
	c.got = resp.Header.Clone()
	c.mu.Unlock()
	return c.Store.Complete(ctx, k, token, resp, ttl)
}

// TestStoredHeadersLeaveOutTheHandlersContentLength: a Content-Length the
// handler sets is never stored, whether it is the only header not kept
// (the handler's own map is then stored with the field held out while the
// store answers), one of several, or set under a name not in canonical
// form; the handler's map has it back, as set, once the Middleware
// returns (what an outer handler reads, and what was sent), in lease and
// in transactional mode; and the replay carries the kept headers.
func TestStoredHeadersLeaveOutTheHandlersContentLength(t *testing.T) {
	kept := http.Header{"Location": {"/ops/1"}, "Content-Type": {"text/plain"}}
	cases := []struct {
		name   string
		extra  http.Header // set by the handler besides kept
		stored http.Header // what Complete gets
	}{
		{"only Content-Length", http.Header{"Content-Length": {"5"}}, kept},
		{"Content-Length and Date", http.Header{"Content-Length": {"5"}, "Date": {"Mon, 07 Dec 2026 10:00:00 GMT"}}, kept},
		{"lowercase content-length", http.Header{"content-length": {"5"}}, kept},
		{"Content-Length twice", http.Header{"Content-Length": {"5", "5"}}, kept},
		{"empty Content-Length", http.Header{"Content-Length": {}}, kept},
		{"nil Content-Length", http.Header{"Content-Length": nil}, kept},
	}
	modes := []struct {
		name string
		wrap func(idempotency.Store) idempotency.Store
	}{
		{"lease", func(s idempotency.Store) idempotency.Store { return s }},
		{"transactional", func(s idempotency.Store) idempotency.Store { return &fakeTxStore{Store: s} }},
	}
	for _, m := range modes {
		for _, c := range cases {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				capture := &completeCapture{Store: newStore(t)}
				h := idempotency.Middleware(m.wrap(capture))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					maps.Copy(w.Header(), kept)
					maps.Copy(w.Header(), c.extra)
					w.WriteHeader(http.StatusCreated)
					_, _ = w.Write([]byte("abcde"))
				}))
				first := post(h, "k-length", `{}`)
				if first.Code != http.StatusCreated || first.Body.String() != "abcde" {
					t.Fatalf("first: %d %q", first.Code, first.Body)
				}
				capture.mu.Lock()
				got := capture.got
				capture.mu.Unlock()
				if !maps.EqualFunc(got, c.stored, slices.Equal) {
					t.Errorf("stored header %v; want %v", got, c.stored)
				}
				for k, v := range c.extra {
					if now, ok := first.Header()[k]; !ok || !slices.Equal(now, v) || (v == nil) != (now == nil) {
						t.Errorf("after the Middleware the handler's %s is %#v (present %v); it set %#v", k, now, ok, v)
					}
				}
				again := post(h, "k-length", `{}`)
				if again.Header().Get(idempotency.HeaderReplayed) != "true" || again.Code != http.StatusCreated || again.Body.String() != "abcde" {
					t.Fatalf("second answer is no replay of the first: %d %q %v", again.Code, again.Body, again.Header())
				}
				for k, v := range kept {
					if !slices.Equal(again.Header()[k], v) {
						t.Errorf("replay's %s = %q; want %q", k, again.Header()[k], v)
					}
				}
			})
		}
	}
}
