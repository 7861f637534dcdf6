package saferetry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry/internal/testkit"
)

func TestBackoffScheduleOnFakeTime(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(502), testkit.Fail(testkit.ErrReset), testkit.Status(201))
	calls := 0
	tr, clk, hl := testTransport(rc, WithBackoff(func() backoff.BackOff {
		calls++
		return backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(100*time.Millisecond),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0),
			backoff.WithMaxElapsedTime(0))
	}))
	resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	closeResp(resp)
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	got := clk.Waits()
	if len(got) != len(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wait %d = %v, want %v", i, got[i], want[i])
		}
		if a := hl.Attempts()[i]; a.Wait != want[i] || a.Decision != DecisionRetry {
			t.Errorf("hook attempt %d = %+v", i+1, a)
		}
	}
	if calls != 1 {
		t.Errorf("backoff factory called %d times for one operation, want 1", calls)
	}
	// A second operation gets a fresh schedule.
	rc2 := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	tr.base = mockBase(rc2)
	resp, err = tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	closeResp(resp)
	if w := clk.Waits(); w[len(w)-1] != 100*time.Millisecond || calls != 2 {
		t.Errorf("second operation waited %v with %d factory calls; want a fresh 100ms schedule", w[len(w)-1], calls)
	}
}

func TestDefaultBackoffIsJitteredAndBounded(t *testing.T) {
	b := DefaultBackoff()
	lows := []time.Duration{125, 250, 500, 1000, 2000, 4000, 5000, 5000}
	for i, low := range lows {
		d := b.NextBackOff()
		lo, hi := low*time.Millisecond, 3*low*time.Millisecond
		if d < lo || d > hi || d > 15*time.Second {
			t.Errorf("step %d: %v outside [%v, %v]", i, d, lo, hi)
		}
	}
}

func TestRetryAfterHonouredCappedAndReported(t *testing.T) {
	tests := []struct {
		name     string
		resp     testkit.Outcome
		min, max time.Duration
		asked    time.Duration
	}{
		{"409 seconds", testkit.StatusH(409, "Retry-After", "2"), 2 * time.Second, 2200 * time.Millisecond, 2 * time.Second},
		{"429 seconds", testkit.StatusH(429, "Retry-After", "1"), time.Second, 1100 * time.Millisecond, time.Second},
		{"503 capped", testkit.StatusH(503, "Retry-After", "3600"), 4500 * time.Millisecond, 5 * time.Second, time.Hour},
		{"500 ignores it", testkit.StatusH(500, "Retry-After", "3600"), 10 * time.Millisecond, 10 * time.Millisecond, 0},
		{"503 malformed uses backoff", testkit.StatusH(503, "Retry-After", "later"), 10 * time.Millisecond, 10 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.resp, testkit.Status(201))
			tr, clk, hl := testTransport(rc, WithMaxRetryAfter(5*time.Second))
			resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
			if err != nil {
				t.Fatal(err)
			}
			closeResp(resp)
			w := clk.Waits()
			if len(w) != 1 || w[0] < tt.min || w[0] > tt.max {
				t.Fatalf("waits %v, want one in [%v, %v]", w, tt.min, tt.max)
			}
			a := hl.Attempts()[0]
			if a.RetryAfter != tt.asked {
				t.Errorf("hook RetryAfter = %v, want %v", a.RetryAfter, tt.asked)
			}
			if tt.asked > 0 && a.Reason != ReasonRetryAfter {
				t.Errorf("reason = %q, want %q", a.Reason, ReasonRetryAfter)
			}
		})
	}
	t.Run("http-date", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Status(201))
		tr, clk, _ := testTransport(rc)
		when := clk.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
		rc.SetScript(testkit.StatusH(503, "Retry-After", when), testkit.Status(201))
		resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
		if err != nil {
			t.Fatal(err)
		}
		closeResp(resp)
		// The date has one-second resolution.
		if w := clk.Waits(); len(w) != 1 || w[0] < 2*time.Second || w[0] > 3300*time.Millisecond {
			t.Fatalf("waits %v, want about 3s", w)
		}
	})
}

func TestNoWaitPastDeadline(t *testing.T) {
	rc := testkit.NewRecorder(testkit.StatusH(429, "Retry-After", "20"), testkit.Status(201))
	tr, clk, hl := testTransport(rc)
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(10*time.Second))
	defer cancel()
	resp, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x"))
	if err != nil {
		t.Fatalf("want the last response, got %v", err)
	}
	if b := rc.Bodies()[0]; b.Closed() {
		t.Error("final response body closed by the Transport")
	}
	closeResp(resp)
	if resp.StatusCode != 429 || len(rc.Seen()) != 1 || len(clk.Waits()) != 0 {
		t.Fatalf("status %d, %d attempts, waits %v; want 429 at once", resp.StatusCode, len(rc.Seen()), clk.Waits())
	}
	if a := hl.Attempts()[0]; a.Reason != ReasonDeadline || a.Decision != DecisionReturn {
		t.Errorf("attempt = %+v", a)
	}
}

func TestNoWaitPastDeadlineAfterTransportError(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
	tr, clk, _ := testTransport(rc, WithBackoff(constBackoff(time.Minute)))
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(30*time.Second))
	defer cancel()
	_, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x"))
	var e *Error
	if !errors.As(err, &e) || e.Cause != ErrOutcomeUnknown || e.Attempts != 1 || !errors.Is(err, testkit.ErrReset) {
		t.Fatalf("err = %v, want testkit.Outcome unknown after 1 attempt wrapping the reset", err)
	}
	if len(clk.Waits()) != 0 {
		t.Errorf("waited %v", clk.Waits())
	}
}

func TestCancelInterruptsWait(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	clk := newFakeClock()
	clk.hold = true
	clk.armed = make(chan time.Duration, 1)
	tr := NewTransport(mockBase(rc), withClock(clk), WithBackoff(constBackoff(time.Hour)))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-clk.armed // the Transport is waiting now
		cancel()
	}()
	resp, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x"))
	if resp != nil {
		t.Fatal("response with error")
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, context.Canceled) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want testkit.Outcome unknown wrapping context.Canceled", err)
	}
	if e.StatusCode != 503 || e.Attempts != 1 || e.Key == "" {
		t.Errorf("error = %+v", e)
	}
	if !rc.Bodies()[0].Closed() {
		t.Error("intermediate body not closed")
	}
}

func TestDeadlineDuringAttemptIsOutcomeUnknown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A base of its own: httpmock answers a request whose context ends
	// during the call with the context's error, at times, not its
	// responder's.
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		cancel()
		return nil, context.DeadlineExceeded
	})
	hl := &hookLog{}
	tr := NewTransport(base, withClock(newFakeClock()), WithBackoff(constBackoff(10*time.Millisecond)), WithHook(hl.hook))
	_, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x"))
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if a := hl.Attempts(); len(a) != 1 || a[0].Reason != ReasonContextDone {
		t.Fatalf("attempts %+v", a)
	}
}

func TestBackoffStop(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503))
	tr, _, hl := testTransport(rc, WithBackoff(func() backoff.BackOff {
		return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Millisecond), 1)
	}))
	resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	closeResp(resp)
	if n := len(rc.Seen()); n != 2 {
		t.Fatalf("attempts = %d, want 2", n)
	}
	if r := hl.Attempts()[1].Reason; r != ReasonBackoffStop {
		t.Errorf("reason = %q", r)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	// Real time, short durations: the first attempt hangs until its own
	// 20ms timeout, the second answers.
	rc := testkit.NewRecorder(testkit.Status(201))
	var calls int
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}
		return rc.Respond(r)
	})
	hl := &hookLog{}
	tr := NewTransport(base, WithAttemptTimeout(20*time.Millisecond), WithBackoff(constBackoff(time.Millisecond)), WithHook(hl.hook))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if a := hl.Attempts(); len(a) != 2 || a[0].Reason != ReasonAttemptTimeout {
		t.Fatalf("attempts %+v", a)
	}
	// The final body stays readable after RoundTrip returned, until closed.
	if _, ok := resp.Body.(*cancelOnClose); !ok {
		t.Fatalf("final body %T does not cancel its attempt on close", resp.Body)
	}
	if resp.Request.Context().Err() != nil {
		t.Fatal("final attempt context ended before the body was closed")
	}
	resp.Body.Close()
	if resp.Request.Context().Err() == nil {
		t.Fatal("closing the body did not end the attempt context")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCancelDuringWaitKeepsLastTransportError(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
	clk := newFakeClock()
	clk.hold = true
	clk.armed = make(chan time.Duration, 1)
	tr := NewTransport(mockBase(rc), withClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-clk.armed
		cancel()
	}()
	_, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x"))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, testkit.ErrReset) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v", err)
	}
}
