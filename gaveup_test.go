package saferetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestErrorSaysWhyRetriesStopped: an operation that ends without a
// response tells, in its *Error, what stopped its retries (the Reason of
// its last attempt's decision, as a hook saw it), and its text says so
// when a limit gave up on an outcome that would have been retried. The
// error of an operation that made no attempt gives no reason.
func TestErrorSaysWhyRetriesStopped(t *testing.T) {
	reset := testkit.Fail(testkit.ErrReset)
	for _, tt := range []struct {
		name     string
		opts     []Option
		ctx      func(clk *fakeClock) (context.Context, context.CancelFunc)
		body     func(t *testing.T) *http.Request // nil: a replayable POST
		attempts int
		want     Reason
	}{
		{name: "max attempts", opts: []Option{WithMaxAttempts(2)}, attempts: 2, want: ReasonMaxAttempts},
		// A retry after a transport error costs 10: one is paid, the next is not.
		{name: "budget exhausted", opts: []Option{WithMaxAttempts(4), WithRetryBudget(10, 5)}, attempts: 2, want: ReasonBudgetExhausted},
		{name: "deadline too close", opts: []Option{WithBackoff(constBackoff(time.Minute))},
			ctx: func(clk *fakeClock) (context.Context, context.CancelFunc) {
				return context.WithDeadline(context.Background(), clk.Now().Add(30*time.Second))
			}, attempts: 1, want: ReasonDeadline},
		{name: "body not replayable", opts: []Option{WithMaxBufferedBody(4)},
			body: func(t *testing.T) *http.Request {
				req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", &plainBody{r: strings.NewReader("0123456789")})
				return req
			}, attempts: 1, want: ReasonBodyNotReplayable},
		{name: "unsafe method without key", opts: []Option{WithKeyMethods()}, attempts: 1, want: ReasonNoKey},
		{name: "not retryable", opts: []Option{WithClassifier(func(*http.Request, *http.Response, error) Decision { return DecisionReturn })},
			attempts: 1, want: ReasonClassifier},
		{name: "before any attempt",
			ctx: func(*fakeClock) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			}, attempts: 0, want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk, hl := testTransport(testkit.NewRecorder(reset), tt.opts...)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx(clk)
			}
			defer cancel()
			req := newReq(t, ctx, http.MethodPost, "x")
			if tt.body != nil {
				req = tt.body(t).WithContext(ctx)
			}
			_, err := tr.RoundTrip(req)
			var e *Error
			if !errors.As(err, &e) || e.Attempts != tt.attempts {
				t.Fatalf("err = %v, want an *Error after %d attempts", err, tt.attempts)
			}
			if e.Reason != tt.want {
				t.Errorf("Reason = %q, want %q", e.Reason, tt.want)
			}
			if as := hl.Attempts(); len(as) > 0 && as[len(as)-1].Reason != e.Reason {
				t.Errorf("Reason = %q, the last attempt's hook saw %q", e.Reason, as[len(as)-1].Reason)
			}
			if gaveUp := strings.Contains(e.Error(), "gave up: "+string(tt.want)); gaveUp != tt.want.IsLimit() {
				t.Errorf("Error() = %q; says it gave up for %q: %v, want %v", e.Error(), tt.want, gaveUp, tt.want.IsLimit())
			}
		})
	}
}

// TestErrorTextNamesTheLimit pins the text of an *Error that a limit
// ended: the reason goes with the key, before the last error.
func TestErrorTextNamesTheLimit(t *testing.T) {
	e := &Error{Cause: ErrOutcomeUnknown, Key: "k-1", Attempts: 2, Reason: ReasonMaxAttempts, Err: testkit.ErrReset}
	if got, want := e.Error(), `saferetry: outcome unknown after 2 attempts (key "k-1"; gave up: max attempts): connection reset by peer`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &Error{Cause: ErrNotSent, Attempts: 1, Reason: ReasonNoKey, Err: testkit.ErrReset}
	if got, want := e.Error(), `saferetry: request not sent after 1 attempt (gave up: unsafe method without key): connection reset by peer`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &Error{Cause: ErrOutcomeUnknown, Key: "k-1", Attempts: 1, Reason: ReasonPermanentError, Err: testkit.ErrReset}
	if got, want := e.Error(), `saferetry: outcome unknown after 1 attempt (key "k-1"): connection reset by peer`; got != want {
		t.Errorf("Error() = %q, want %q (a reason that is no give-up is not told)", got, want)
	}
}

// TestErrorReasonWhenTheWaitIsInterrupted: a context that ends during the
// wait before a retry stops the retries: the *Error says ReasonContextDone,
// not the retry's reason, and the text does not call it a give-up.
func TestErrorReasonWhenTheWaitIsInterrupted(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, _, hl := testTransport(rc, WithHook(func(Attempt) { cancel() }))
	_, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x"))
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 1 || hl.Attempts()[0].Decision != DecisionRetry {
		t.Fatalf("err = %v, attempts %+v; want an *Error after 1 attempt that was to be retried", err, hl.Attempts())
	}
	if e.Reason != ReasonContextDone || strings.Contains(e.Error(), "gave up") {
		t.Errorf("Reason = %q, Error() = %q; want %q, not told as a give-up", e.Reason, e.Error(), ReasonContextDone)
	}
}

// TestClientErrorSaysWhyRetriesStopped: the *Error that Client.Do returns
// under net/http's *url.Error carries the reason, and its text tells it.
func TestClientErrorSaysWhyRetriesStopped(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
	c := testClient(rc, WithMaxAttempts(3), WithRetryBudget(10, 5))
	_, err := c.Do(newReq(t, WithKey(context.Background(), "debit-7"), http.MethodPost, "x"))
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 2 || e.Reason != ReasonBudgetExhausted {
		t.Fatalf("err = %v, want an *Error after 2 attempts with Reason %q", err, ReasonBudgetExhausted)
	}
	if !strings.Contains(err.Error(), `(key "debit-7"; gave up: retry budget exhausted)`) {
		t.Errorf("Error() = %q, does not tell the give-up", err.Error())
	}
}

// TestAPIErrorSaysWhyRetriesStopped: the *APIError of a final status of
// 400 or above carries the Reason of the last attempt's decision: the
// limit that gave up on a retryable status, or why the status is final.
func TestAPIErrorSaysWhyRetriesStopped(t *testing.T) {
	for _, tt := range []struct {
		name     string
		script   testkit.Outcome
		opts     []Option
		deadline time.Duration // 0: none
		unbuffer bool          // a body too large to buffer
		attempts int
		want     Reason
	}{
		{name: "max attempts", script: testkit.Status(503), opts: []Option{WithMaxAttempts(2)}, attempts: 2, want: ReasonMaxAttempts},
		{name: "budget exhausted", script: testkit.Status(503), opts: []Option{WithRetryBudget(5, 5)}, attempts: 2, want: ReasonBudgetExhausted},
		{name: "deadline too close", script: testkit.StatusH(429, "Retry-After", "3600"), opts: []Option{WithMaxRetryAfter(2 * time.Hour)},
			deadline: time.Minute, attempts: 1, want: ReasonDeadline},
		{name: "body not replayable", script: testkit.Status(503), opts: []Option{WithMaxBufferedBody(4)}, unbuffer: true, attempts: 1, want: ReasonBodyNotReplayable},
		{name: "final status", script: testkit.Status(404), attempts: 1, want: ReasonFinalStatus},
		{name: "replayed", script: testkit.StatusH(503, HeaderReplayed, "true"), attempts: 1, want: ReasonReplayed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hl := &hookLog{}
			c := testClient(testkit.NewRecorder(tt.script), append([]Option{WithHook(hl.hook)}, tt.opts...)...)
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			req := newReq(t, ctx, http.MethodPost, "x")
			if tt.unbuffer {
				req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/debits", &plainBody{r: strings.NewReader("0123456789")})
			}
			_, err := c.Do(req)
			var ae *APIError
			if !errors.As(err, &ae) || ae.StatusCode != tt.script.Status || ae.Attempts != tt.attempts {
				t.Fatalf("err = %v, want an *APIError for %d after %d attempts", err, tt.script.Status, tt.attempts)
			}
			if ae.Reason != tt.want {
				t.Errorf("Reason = %q, want %q", ae.Reason, tt.want)
			}
			if as := hl.Attempts(); as[len(as)-1].Reason != ae.Reason {
				t.Errorf("Reason = %q, the last attempt's hook saw %q", ae.Reason, as[len(as)-1].Reason)
			}
		})
	}
}
