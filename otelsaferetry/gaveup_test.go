package otelsaferetry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

func hourBackoff() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }

// TestGaveUp ends operations on each limit and counts them by it, and
// shows what is not giving up: a final answer, and no attempt at all.
func TestGaveUp(t *testing.T) {
	cases := []struct {
		name      string
		statuses  []int
		opts      []saferetry.Option
		header    string // an Idempotency-Key header to send
		wantErr   error
		gaveUp    string // the reason counted, "" for none
		attempts  int64
		budget    int64
		outcome   string
		errorType string // on the operation span
	}{
		{name: "max attempts", statuses: []int{503}, opts: []saferetry.Option{saferetry.WithMaxAttempts(2)},
			gaveUp: "max attempts", attempts: 2, outcome: "5xx", errorType: "503"},
		{name: "budget", statuses: []int{503}, opts: []saferetry.Option{saferetry.WithRetryBudget(1, 1)},
			gaveUp: "retry budget exhausted", attempts: 2, budget: 1, outcome: "5xx", errorType: "503"},
		{name: "deadline", statuses: []int{503}, opts: []saferetry.Option{saferetry.WithBackoff(hourBackoff)},
			gaveUp: "wait would pass deadline", attempts: 1, outcome: "5xx", errorType: "503"},
		{name: "no key", statuses: []int{503}, opts: []saferetry.Option{saferetry.WithKeyMethods()},
			gaveUp: "unsafe method without key", attempts: 1, outcome: "5xx", errorType: "503"},
		{name: "cancelled while waiting", statuses: []int{503}, opts: []saferetry.Option{saferetry.WithBackoff(hourBackoff)},
			wantErr: saferetry.ErrOutcomeUnknown, gaveUp: "context done", attempts: 1, outcome: "error",
			errorType: "saferetry.outcome_unknown"},
		{name: "final answer", statuses: []int{404}, attempts: 1, outcome: "4xx", errorType: "404"},
		{name: "no attempt", statuses: []int{201}, header: "bad\x01key", wantErr: saferetry.ErrInvalidKey,
			outcome: "error", errorType: "saferetry.invalid_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			srv := newScript(t, c.statuses...)
			opts := c.opts
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if c.name == "cancelled while waiting" {
				cancel()
				ctx, cancel = context.WithCancel(context.Background()) // no deadline to stop the retry
				opts = append(opts, saferetry.WithHook(func(a saferetry.Attempt) {
					if a.Decision == saferetry.DecisionRetry {
						cancel()
					}
				}))
			}
			defer cancel()
			rt := otelsaferetry.NewTransport(nil, r.options(otelsaferetry.WithRetryOptions(opts...))...)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("debit"))
			if c.header != "" {
				req.Header.Set(saferetry.HeaderIdempotencyKey, c.header)
			}
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("RoundTrip: %v, want %v", err, c.wantErr)
			}
			checkGaveUp(t, r, c.gaveUp, c.attempts, c.budget, c.outcome, c.errorType)
		})
	}
}

func checkGaveUp(t *testing.T, r *rig, gaveUp string, attempts, budget int64, outcome, errorType string) {
	t.Helper()
	ms := r.collect(t)
	want := int64(0)
	if gaveUp != "" {
		want = 1
	}
	if got := sum(t, ms, otelsaferetry.MetricGaveUp, otelsaferetry.AttributeReason.String(gaveUp)); got != want {
		t.Errorf("gave_up{reason=%q} = %d, want %d", gaveUp, got, want)
	}
	if got := sum(t, ms, otelsaferetry.MetricGaveUp); got != want {
		t.Errorf("gave_up = %d, want %d", got, want)
	}
	if got := sum(t, ms, otelsaferetry.MetricAttempts); got != attempts {
		t.Errorf("attempts = %d, want %d", got, attempts)
	}
	if got := sum(t, ms, otelsaferetry.MetricBudgetExhausted); got != budget {
		t.Errorf("budget.exhausted = %d, want %d", got, budget)
	}
	n, _ := histogram(t, ms, otelsaferetry.MetricOperationDuration, otelsaferetry.AttributeOutcome.String(outcome))
	if n != 1 {
		t.Errorf("operation.duration{outcome=%s}: %d operations, want 1", outcome, n)
	}
	if attempts == 0 {
		h := ms[otelsaferetry.MetricOperationDuration]
		for _, set := range attributeSets(h) {
			if _, ok := set.Value(otelsaferetry.AttributeReason); ok {
				t.Errorf("operation.duration has a reason with no attempt: %v", set.ToSlice())
			}
		}
	}
	for _, s := range r.spans.Ended() {
		if s.Name() != "saferetry POST" {
			continue
		}
		if v, _ := attr(s, semconv.ErrorTypeKey); v.AsString() != errorType {
			t.Errorf("operation span error.type %q, want %q", v.AsString(), errorType)
		}
		if v, _ := attr(s, otelsaferetry.AttributeAttempts); v.AsInt64() != attempts {
			t.Errorf("operation span: %d attempts, want %d", v.AsInt64(), attempts)
		}
		return
	}
	t.Error("no operation span ended")
}
