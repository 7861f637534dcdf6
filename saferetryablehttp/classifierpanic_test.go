package saferetryablehttp

import (
	"context"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestPanickingClassifierLetsGo: a classifier that panics sends the panic
// on to the caller, as it was, and the answer it was given is closed
// first, as the Transport does (its connection is not held for good by a
// caller that recovers, as net/http's server does for a handler).
func TestPanickingClassifierLetsGo(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusCreated} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(status), testkit.Status(http.StatusCreated))
			c := newRetryable(t, rc, WithRetryBudget(100, 5), WithClassifier(func(*http.Request, *http.Response, error) saferetry.Decision {
				panic("classifier")
			}))
			testkit.WantPanic(t, "classifier", func() {
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
		})
	}
}
