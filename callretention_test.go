package saferetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"
)

// TestResponseKeepsNoCall: a Client.Do call's response, and the attempts
// a hook keeps, do not keep the call's context in memory when the hop's
// context is the call's own (no Timeout, no RoundTripper around the
// Transport that makes one): the attempts' contexts are made from the
// call's parent. Also after a 307 (the POST sent again) or a 303 (a GET
// after it), whose final response reaches the first hop's answer and
// attempts through its Request's Response. (A key the call generated is
// the text the call holds: the attempts' header, and so the response,
// keeps the call then.)
func TestResponseKeepsNoCall(t *testing.T) {
	for _, redirect := range []int{0, http.StatusTemporaryRedirect, http.StatusSeeOther} {
		t.Run(fmt.Sprint(redirect), func(t *testing.T) {
			hops := 0
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				hops++
				if hops == 1 && redirect != 0 {
					return &http.Response{StatusCode: redirect, Header: http.Header{"Location": {"/v1/other"}}, Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			})
			var kept []*http.Request
			c := NewClient(WithBase(base), WithHook(func(a Attempt) { kept = append(kept, a.Request) }))
			call := watchCall(c)
			req := newReq(t, context.Background(), http.MethodPost, "debit 1500")
			req.Header.Set(HeaderIdempotencyKey, "debit-1")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if want := 1 + min(redirect, 1); hops != want || len(kept) != want || (redirect != 0) != (resp.Request.Response != nil) {
				t.Fatalf("%d hops, %d attempts seen by the hook, the answer follows %v; want %d, %d", hops, len(kept), resp.Request.Response, want, want)
			}
			runtime.GC()
			if call.Value() != nil {
				t.Error("the call's context is still in memory after the call, kept by its response or the hook's attempts")
			}
			if key, _ := KeyFromResponse(resp); key != "debit-1" || resp.Request.Context().Value(callCtxKey{}) != nil {
				t.Errorf("the response's key is %q, its context shows a call: %v", key, resp.Request.Context().Value(callCtxKey{}) != nil)
			}
			runtime.KeepAlive(resp)
			runtime.KeepAlive(kept)
		})
	}
}

// TestErrorsKeepNoCall: the error of a Client.Do call, kept after the
// call, does not keep the call's context, and so neither the last answer
// nor the request body it holds: for a key the call generated, an
// *APIError's Key and an *Error's Key were the key's text inside the
// call; for the caller's key, after a retry, under an http.Client Timeout
// (whose context net/http makes from the call's, a child of the caller's
// cancellable context), with a hook that keeps the attempts' errors.
func TestErrorsKeepNoCall(t *testing.T) {
	for _, ending := range []string{"APIError", "Error"} {
		for _, timeout := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/timeout=%v", ending, timeout), func(t *testing.T) {
				status := http.StatusUnprocessableEntity
				if timeout {
					status = http.StatusServiceUnavailable
				}
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if ending == "Error" {
						return nil, errors.New("connection reset after the request was written")
					}
					return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
				})
				var errs []error
				opts := []Option{WithBase(base), WithMaxAttempts(1)}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req := newReq(t, ctx, http.MethodPost, "debit 1500")
				if timeout {
					opts = append(opts, WithMaxAttempts(2), withClock(newFakeClock()),
						WithHTTPClient(&http.Client{Timeout: time.Hour}),
						WithHook(func(a Attempt) { errs = append(errs, a.Err) }))
					req.Header.Set(HeaderIdempotencyKey, "debit-1")
				}
				c := NewClient(opts...)
				call := watchCall(c)
				_, err := c.Do(req)
				var key string
				var apiErr *APIError
				var opErr *Error
				switch {
				case errors.As(err, &apiErr):
					key = apiErr.Key
				case errors.As(err, &opErr):
					key = opErr.Key
				default:
					t.Fatalf("Do: %v; want an *APIError or an *Error", err)
				}
				if _, perr := ParseKey(key); perr != nil {
					t.Fatalf("the error's key %q: %v", key, perr)
				}
				if timeout && len(errs) != 2 {
					t.Fatalf("the hook saw %d attempts; want 2", len(errs))
				}
				// net/http's goroutine that watches the Timeout holds the
				// hop's request until it sees the timer stopped.
				for i := 0; i < 100 && call.Value() != nil; i++ {
					runtime.GC()
					time.Sleep(time.Millisecond)
				}
				if call.Value() != nil {
					t.Errorf("the call's context is still in memory after the call, kept by its %T or the hook's errors", err)
				}
				runtime.KeepAlive(err)
				runtime.KeepAlive(errs)
				runtime.KeepAlive(ctx)
			})
		}
	}
}

// TestHookKeyKeepsNoCall: the key a hook is given (Attempt.Key), kept
// after a Client.Do call whose key the call generated, does not keep the
// call's context in memory: it was the key's text inside the call.
func TestHookKeyKeepsNoCall(t *testing.T) {
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	var keys []string
	c := NewClient(WithBase(base), WithHook(func(a Attempt) { keys = append(keys, a.Key) }))
	call := watchCall(c)
	resp, err := c.Do(newReq(t, context.Background(), http.MethodPost, "debit 1500"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp = nil
	if len(keys) != 1 {
		t.Fatalf("the hook saw %d attempts; want 1", len(keys))
	}
	if _, err := ParseKey(keys[0]); err != nil {
		t.Fatalf("the hook's key %q: %v", keys[0], err)
	}
	runtime.GC()
	if call.Value() != nil {
		t.Error("the call's context is still in memory after the call, kept by the key a hook kept")
	}
	runtime.KeepAlive(keys)
}

// TestHookKeyKeepsNoCallAcrossHops: as TestHookKeyKeepsNoCall, for every
// hop of a 307 redirect (each a RoundTrip of its own, with the key the
// call pinned), for a hook and a logger's handler, with the key sent as
// a token or as an sf-string (whose header value is a string of its own).
func TestHookKeyKeepsNoCallAcrossHops(t *testing.T) {
	for _, tc := range []struct {
		name               string
		logger, structured bool
	}{{"hook", false, false}, {"hook/sf-string", false, true}, {"logger", true, false}, {"logger/sf-string", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var wires []string
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				wires = append(wires, r.Header.Get(HeaderIdempotencyKey))
				if len(wires) == 1 {
					return &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {"/v1/other"}}, Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			})
			var keys []string
			var logged string
			opts := []Option{WithBase(base), WithStructuredKey(tc.structured)}
			if tc.logger {
				opts = append(opts, WithLogger(slog.New(&keyKeeper{key: &logged})))
			} else {
				opts = append(opts, WithHook(func(a Attempt) { keys = append(keys, a.Key) }))
			}
			c := NewClient(opts...)
			call := watchCall(c)
			resp, err := c.Do(newReq(t, context.Background(), http.MethodPost, "debit 1500"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			resp = nil
			if tc.logger {
				keys = append(keys, logged)
			}
			if len(wires) != 2 || wires[0] == "" || wires[1] != wires[0] {
				t.Fatalf("the hops sent the keys %q; want the same key twice", wires)
			}
			if !tc.logger && len(keys) != 2 {
				t.Fatalf("the hook saw %d attempts; want 2", len(keys))
			}
			for _, k := range keys {
				if FormatKey(k, tc.structured) != wires[0] {
					t.Errorf("kept the key %q; the hops sent %q", k, wires[0])
				}
			}
			wires = nil
			runtime.GC()
			if call.Value() != nil {
				t.Error("the call's context is still in memory after the call, kept by the key a hook or logger kept")
			}
			runtime.KeepAlive(keys)
		})
	}
}

// watchCall puts a RoundTripper around c's Transport that notes, weakly,
// the call context of each request it passes on, and returns where it
// notes it: it passes each request on itself, so that the hop's context
// is the call's own.
func watchCall(c *Client) *weak.Pointer[callContext] {
	call := new(weak.Pointer[callContext])
	hc := c.HTTPClient()
	inner := hc.Transport
	hc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		*call = weak.Make(r.Context().Value(callCtxKey{}).(*callContext))
		return inner.RoundTrip(r)
	})
	return call
}
