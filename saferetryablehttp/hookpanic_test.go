package saferetryablehttp

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestPanickingHookLetsGo: the caller's hooks that retryablehttp runs
// between an attempt and the next (ResponseLogHook with the answer open
// and the retry, if any, already paid; PrepareRetry; RequestLogHook
// before the retry is sent) send their panic on to the caller, as it was,
// and the adapter lets go first, as the saferetry Transport does with its
// own hooks: the answer's body is closed (a caller that recovers, as
// net/http's server does for a handler, is not left with its connection
// held) and the retry never made goes back to the budget that the
// client's other requests share (of 10 at cost 5, they still get two
// retries).
func TestPanickingHookLetsGo(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		setup  func(c *retryablehttp.Client, armed *atomic.Bool)
	}{
		{"ResponseLogHook, retried answer", http.StatusServiceUnavailable, func(c *retryablehttp.Client, armed *atomic.Bool) {
			c.ResponseLogHook = func(retryablehttp.Logger, *http.Response) {
				if armed.Load() {
					panic("hook")
				}
			}
		}},
		{"ResponseLogHook, final answer", http.StatusCreated, func(c *retryablehttp.Client, armed *atomic.Bool) {
			c.ResponseLogHook = func(retryablehttp.Logger, *http.Response) {
				if armed.Load() {
					panic("hook")
				}
			}
		}},
		{"PrepareRetry", http.StatusServiceUnavailable, func(c *retryablehttp.Client, armed *atomic.Bool) {
			c.PrepareRetry = func(*http.Request) error {
				if armed.Load() {
					panic("hook")
				}
				return nil
			}
		}},
		{"RequestLogHook of the retry", http.StatusServiceUnavailable, func(c *retryablehttp.Client, armed *atomic.Bool) {
			c.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, retry int) {
				if retry > 0 && armed.Load() {
					panic("hook")
				}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(tt.status), testkit.Status(http.StatusCreated))
			var armed atomic.Bool
			armed.Store(true)
			c := newRetryableWith(t, rc, func(c *retryablehttp.Client) { tt.setup(c, &armed) },
				WithRetryBudget(10, 5), WithMaxAttempts(4))
			testkit.WantPanic(t, "hook", func() {
				resp, _ := c.Do(rhReq(t, context.Background(), http.MethodPost, `{"amount":1}`))
				if resp != nil {
					resp.Body.Close()
				}
			})
			bodies := rc.Bodies()
			if len(bodies) != 1 {
				t.Fatalf("%d attempts, want 1", len(bodies))
			}
			if !bodies[0].Closed() {
				t.Error("the answer's body was left open")
			}
			armed.Store(false)
			wantTwoRetries(t, c, rc)
		})
	}
}
