package saferetryablehttp

import (
	"context"
	"net/http"
	"testing"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

func TestDefaultAttempts(t *testing.T) {
	if n := retryablehttp.NewClient().RetryMax; n != newClientRetryMax {
		t.Fatalf("retryablehttp.NewClient's RetryMax is %d now, not %d: update newClientRetryMax", n, newClientRetryMax)
	}
	for _, tt := range []struct {
		name     string
		retryMax int // before Configure; -1 leaves NewClient's
		opts     []Option
		want     int
	}{
		{"NewClient's default becomes saferetry's", -1, nil, saferetry.DefaultMaxAttempts - 1},
		{"a RetryMax set by the caller stays", 7, nil, 7},
		{"no retries stays", 0, nil, 0},
		{"WithMaxAttempts wins", 7, []Option{WithMaxAttempts(5)}, 4},
		{"WithMaxAttempts below 1 is 1", -1, []Option{WithMaxAttempts(0)}, 0},
	} {
		c := retryablehttp.NewClient()
		if tt.retryMax >= 0 {
			c.RetryMax = tt.retryMax
		}
		Configure(c, tt.opts...)
		if c.RetryMax != tt.want {
			t.Errorf("%s: RetryMax = %d, want %d", tt.name, c.RetryMax, tt.want)
		}
	}
}

// TestBudgetNotSpentOnTheLastAttempt checks that a retry RetryMax forbids
// costs nothing: a budget of 10 at cost 5 pays for the one retry of each of
// two requests of two attempts.
func TestBudgetNotSpentOnTheLastAttempt(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503))
	c := newRetryable(t, rc, WithRetryBudget(10, 5), WithMaxAttempts(2))
	for i := 0; i < 2; i++ {
		mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
	}
	if n := len(rc.Seen()); n != 4 {
		t.Fatalf("%d attempts, want 2 per request", n)
	}
}

func TestClassifierAndStructuredKeyApply(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(400), testkit.Status(201))
	c := newRetryable(t, rc, WithStructuredKey(true), WithClassifier(func(_ *http.Request, resp *http.Response, _ error) saferetry.Decision {
		if resp != nil && resp.StatusCode == 400 {
			return saferetry.DecisionRetry
		}
		return saferetry.DecisionDefault
	}))
	resp := mustDo(t, c, rhReq(t, saferetry.WithKey(context.Background(), "order-7"), http.MethodPost, "x"))
	s := rc.Seen()
	if resp.StatusCode != 201 || len(s) != 2 {
		t.Fatalf("status %d after %d attempts; want the classifier to retry the 400", resp.StatusCode, len(s))
	}
	for i, a := range s {
		if len(a.Keys) != 1 || a.Keys[0] != `"order-7"` {
			t.Errorf("attempt %d keys %q, want the sf-string", i+1, a.Keys)
		}
	}
}
