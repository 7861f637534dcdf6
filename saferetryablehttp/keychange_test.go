package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestRetryKeepsItsKey: a retry goes out under the key of the request's
// first attempt, or not at all. A PrepareRetry or RequestLogHook of the
// caller's that drops the key from the retry's header (re-signing code
// that builds the header anew), or changes it, would have a state-changing
// request that may have been carried out (the connection was reset after
// it was written) sent again as a new one. The adapter refuses to send it;
// the request ends in saferetry.ErrOutcomeUnknown with the first key, with
// which the caller can ask again, also when the hook left the header with
// a key that is not valid (a second value, an empty one): that is not the
// caller's invalid key, which nothing was sent with. A hook that leaves
// the key alone changes nothing.
func TestRetryKeepsItsKey(t *testing.T) {
	prepare := func(f func(*http.Request)) func(*retryablehttp.Client) {
		return func(c *retryablehttp.Client) {
			c.PrepareRetry = func(r *http.Request) error { f(r); return nil }
		}
	}
	hook := func(f func(*http.Request)) func(*retryablehttp.Client) {
		return func(c *retryablehttp.Client) {
			c.RequestLogHook = func(_ retryablehttp.Logger, r *http.Request, retry int) {
				if retry > 0 {
					f(r)
				}
			}
		}
	}
	del := func(r *http.Request) { r.Header.Del(saferetry.HeaderIdempotencyKey) }
	change := func(r *http.Request) { r.Header.Set(saferetry.HeaderIdempotencyKey, "another-key") }
	anew := func(r *http.Request) { r.Header = http.Header{"X-Signature": {"sig"}} }
	sign := func(r *http.Request) { r.Header.Set("X-Signature", "sig") }
	// A key made invalid is not the first attempt's either: the retry
	// is not sent, and the request's outcome is not an invalid key's
	// (nothing sent) but its first attempt's.
	second := func(r *http.Request) { r.Header.Add(saferetry.HeaderIdempotencyKey, "another-key") }
	empty := func(r *http.Request) { r.Header.Set(saferetry.HeaderIdempotencyKey, "") }
	lower := func(r *http.Request) { r.Header["idempotency-key"] = []string{"another-key"} }
	for _, tt := range []struct {
		name  string
		setup func(*retryablehttp.Client)
		kept  bool // the hook keeps the key: the retry is sent
	}{
		{"PrepareRetry drops the key", prepare(del), false},
		{"PrepareRetry changes the key", prepare(change), false},
		{"PrepareRetry builds a header without it", prepare(anew), false},
		{"RequestLogHook drops the key", hook(del), false},
		{"RequestLogHook changes the key", hook(change), false},
		{"PrepareRetry adds a second key", prepare(second), false},
		{"PrepareRetry empties the key", prepare(empty), false},
		{"RequestLogHook adds one under a non-canonical name", hook(lower), false},
		{"PrepareRetry signs", prepare(sign), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset), testkit.Status(http.StatusCreated))
			c := newRetryableWith(t, rc, tt.setup)
			resp, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
			s := rc.Seen()
			if len(s) == 0 || len(s[0].Keys) != 1 {
				t.Fatalf("first attempt %+v, want one with a key", s)
			}
			first := s[0].Keys[0]
			for i, a := range s[1:] {
				if len(a.Keys) != 1 || a.Keys[0] != first {
					t.Errorf("retry %d went out with keys %q, want [%q]", i+1, a.Keys, first)
				}
			}
			if tt.kept {
				if err != nil || resp.StatusCode != http.StatusCreated || len(s) != 2 {
					t.Fatalf("err %v after %d attempts, want 201 after 2", err, len(s))
				}
				resp.Body.Close()
				return
			}
			var e *saferetry.Error
			if resp != nil || !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Key != first || len(s) != 1 {
				t.Fatalf("resp %v, err %v after %d attempts; want saferetry.ErrOutcomeUnknown with key %q after 1", resp, err, len(s), first)
			}
		})
	}
}

// TestChangedKeyAfterKeylessHop: the refused retry's error carries the
// request's first key also when the attempt before it ended on a hop sent
// without the key (the GET after a 303 to another origin, answered 503):
// the caller asks again with that key, not with none.
func TestChangedKeyAfterKeylessHop(t *testing.T) {
	rc := testkit.NewRecorder(
		testkit.StatusH(http.StatusSeeOther, "Location", "http://cdn.test/receipts/7"),
		testkit.Status(http.StatusServiceUnavailable),
		testkit.Status(http.StatusCreated))
	c := newRetryableWith(t, rc, func(c *retryablehttp.Client) {
		c.PrepareRetry = func(r *http.Request) error {
			r.Header.Set(saferetry.HeaderIdempotencyKey, "another-key")
			return nil
		}
	})
	resp, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
	s := rc.Seen()
	if len(s) != 2 || len(s[0].Keys) != 1 || len(s[1].Keys) != 0 {
		t.Fatalf("round trips %+v, want the POST with a key and the GET elsewhere without", s)
	}
	var e *saferetry.Error
	if resp != nil || !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Key != s[0].Keys[0] {
		t.Fatalf("resp %v, err %v (key %q); want saferetry.ErrOutcomeUnknown with key %q", resp, err, keyOf(e), s[0].Keys[0])
	}
}

func keyOf(e *saferetry.Error) string {
	if e == nil {
		return ""
	}
	return e.Key
}
