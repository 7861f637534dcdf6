package saferetry

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
)

// sparedHeader returns a header of n entries (the key among them when
// key is not ""), each value slice with spare capacity that an append
// would write into, and a deep copy of it to compare with later.
func sparedHeader(n int, key string) (h, want http.Header) {
	h = http.Header{}
	for i := range n {
		vv := make([]string, 1, 4)
		vv[0] = fmt.Sprintf("v%d", i)
		h[fmt.Sprintf("X-H%02d", i)] = vv
	}
	if key != "" {
		vv := make([]string, 1, 4)
		vv[0] = key
		h[HeaderIdempotencyKey] = vv
		delete(h, "X-H00")
	}
	return h, h.Clone()
}

// spareUntouched reports the first value of h written into the spare
// capacity of one of its value slices.
func spareUntouched(h http.Header) error {
	for name, vv := range h {
		for i, v := range vv[len(vv):cap(vv)] {
			if v != "" {
				return fmt.Errorf("%s holds %q beyond its length, at %d", name, v, len(vv)+i)
			}
		}
	}
	return nil
}

// TestAttemptHeadersShareNoSpareCapacity: through Client.Do, whatever a
// base (breaking the RoundTripper contract), a hook or the redirect
// policy adds to an attempt's header stays in that attempt's header: the
// caller's header (its entries and the spare capacity of its values) is
// as it was, and neither a retry nor the next hop of a 307 sees it; for
// headers small enough for maps.Clone (0 to 7 entries with the key) and
// larger, nil or empty, with the caller's key or a generated one. Pins
// cloneHeader's clip.
func TestAttemptHeadersShareNoSpareCapacity(t *testing.T) {
	for _, n := range []int{0, 1, 6, 7, 8, 9, 12} {
		for _, key := range []string{"", "debit-1"} {
			for _, nilHeader := range []bool{false, true} {
				if nilHeader && (n > 0 || key != "") {
					continue
				}
				t.Run(fmt.Sprintf("%d/key=%q/nil=%v", n, key, nilHeader), func(t *testing.T) {
					h, want := sparedHeader(n, key)
					if nilHeader {
						h, want = nil, nil
					}
					var seen []http.Header
					base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
						seen = append(seen, r.Header.Clone())
						for name := range r.Header {
							r.Header.Add(name, "base")
						}
						r.Header.Add("X-Base", "base")
						switch len(seen) {
						case 1:
							return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
						case 2:
							return &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {"/v1/other"}}, Body: http.NoBody, Request: r}, nil
						}
						return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
					})
					hook := func(a Attempt) {
						for name := range a.Request.Header {
							a.Request.Header.Add(name, "hook")
						}
					}
					c := NewClient(WithBase(base), WithHook(hook), withClock(newFakeClock()))
					req := newReq(t, context.Background(), http.MethodPost, "debit 1500")
					req.Header = h
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if len(seen) != 3 {
						t.Fatalf("the base saw %d attempts; want 3 (a retry, then a 307's hop)", len(seen))
					}
					if len(req.Header) != len(want) {
						t.Errorf("the caller's header has %d entries after the call; want %d", len(req.Header), len(want))
					}
					for name, vv := range want {
						if !slices.Equal(req.Header[name], vv) {
							t.Errorf("the caller's %s is %q after the call; want %q", name, req.Header[name], vv)
						}
					}
					if err := spareUntouched(req.Header); err != nil {
						t.Errorf("the caller's header: %v", err)
					}
					sent := seen[0].Get(HeaderIdempotencyKey)
					if sent == "" || (key != "" && sent != key) {
						t.Fatalf("the first attempt sent the key %q; want %q or a generated one", sent, key)
					}
					for i, s := range seen {
						if got := s[HeaderIdempotencyKey]; len(got) != 1 || got[0] != sent {
							t.Errorf("attempt %d sent the keys %q; want %q once", i+1, got, sent)
						}
						if v, ok := s["X-Base"]; ok {
							t.Errorf("attempt %d sent X-Base %q, added to an earlier attempt", i+1, v)
						}
						for name, vv := range want {
							if name != HeaderIdempotencyKey && !slices.Equal(s[name], vv) {
								t.Errorf("attempt %d sent %s %q; want %q", i+1, name, s[name], vv)
							}
						}
					}
				})
			}
		}
	}
}

// TestSharedHeaderConcurrentCalls: many goroutines send requests sharing
// one header map (a client's default headers) through one Client, whose
// base and hook add to every attempt's header: under -race, an attempt
// header that shared spare capacity with the caller's values would be a
// write to memory the other goroutines write too. For headers of up to
// 8 entries with the key, once copied by maps.Clone, and larger ones.
func TestSharedHeaderConcurrentCalls(t *testing.T) {
	for _, n := range []int{3, 7, 12} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			shared, want := sparedHeader(n, "")
			var mu sync.Mutex
			tries := map[string]int{}
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				for name := range r.Header {
					r.Header.Add(name, "base")
				}
				mu.Lock()
				tries[r.Header.Get(HeaderIdempotencyKey)]++
				first := tries[r.Header.Get(HeaderIdempotencyKey)] == 1
				mu.Unlock()
				status := http.StatusCreated
				if first {
					status = http.StatusServiceUnavailable
				}
				return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			})
			hook := func(a Attempt) { a.Request.Header.Add("X-H01", "hook") }
			c := NewClient(WithBase(base), WithHook(hook), withClock(newFakeClock()), WithRetryBudget(0, 0))
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 20 {
						req := newReq(t, context.Background(), http.MethodPost, "debit 1500")
						req.Header = shared
						resp, err := c.Do(req)
						if err != nil {
							t.Errorf("Do: %v", err)
							return
						}
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			for name, vv := range want {
				if !slices.Equal(shared[name], vv) {
					t.Errorf("the shared %s is %q; want %q", name, shared[name], vv)
				}
			}
			if err := spareUntouched(shared); err != nil {
				t.Errorf("the shared header: %v", err)
			}
			if len(tries) != 8*20 {
				t.Errorf("%d keys sent; want %d, one per call", len(tries), 8*20)
			}
		})
	}
}
