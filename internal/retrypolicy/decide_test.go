package retrypolicy

import (
	"crypto/tls"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// t0 is the fake now of the decision tests.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func answer(status int, kv ...string) Outcome {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/", nil)
	return Outcome{Request: req, Response: &http.Response{StatusCode: status, Header: h}}
}

func failure(err error) Outcome {
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/", nil)
	return Outcome{Request: req, Err: err}
}

var errReset = errors.New("connection reset by peer")

// TestDecide runs the decision on fake time: a constant 100 ms backoff, a
// zero jitter, a 30 s Retry-After cap and a budget of 20 tokens at 5 a
// retry, for the third attempt of four unless a case says otherwise.
func TestDecide(t *testing.T) {
	retryOn404 := func(_ *http.Request, resp *http.Response, _ error) Override {
		if resp != nil && resp.StatusCode == 404 {
			return Retry
		}
		return Default
	}
	stop := func(*http.Request, *http.Response, error) Override { return Return }
	tests := []struct {
		name     string
		o        Outcome
		st       State // Attempt 0 means 3, MaxAttempts 0 means 4
		classify func(*http.Request, *http.Response, error) Override
		tokens   int64 // tokens to leave in the budget; 0 means all 20
		newBO    func() backoff.BackOff

		retry      bool
		reason     Reason
		wait       time.Duration
		retryAfter time.Duration
		after      int64 // tokens left after the decision
	}{
		{name: "201 final, refills what was spent", o: answer(201), st: State{Progress: Progress{Spent: 10}}, tokens: 10,
			reason: ReasonFinalStatus, after: 20},
		{name: "201 without retries refills one", o: answer(201), tokens: 10, reason: ReasonFinalStatus, after: 11},
		{name: "404 final refills", o: answer(404), tokens: 10, reason: ReasonFinalStatus, after: 11},
		{name: "409 replayed final", o: answer(409, "Idempotent-Replayed", "true"), tokens: 10, reason: ReasonReplayed, after: 11},
		{name: "503 replayed final, no refill", o: answer(503, "Idempotent-Replayed", "true"), tokens: 10, reason: ReasonReplayed, after: 10},
		{name: "500 the server says is final, no refill", o: answer(500, "Stripe-Should-Retry", "false"), tokens: 10,
			reason: ReasonServerSaid, after: 10},
		{name: "400 final whatever the server says", o: answer(400, "Stripe-Should-Retry", "true"), tokens: 10,
			reason: ReasonFinalStatus, after: 11},
		{name: "422 final whatever the server says", o: answer(422, "Stripe-Should-Retry", "true"), tokens: 10,
			reason: ReasonFinalStatus, after: 11},
		{name: "404 the server says to retry", o: answer(404, "Stripe-Should-Retry", "true"), retry: true, reason: ReasonServerSaid,
			wait: 100 * time.Millisecond, after: 15},
		{name: "503 retried", o: answer(503), retry: true, reason: ReasonRetryableStatus, wait: 100 * time.Millisecond, after: 15},
		{name: "409 retried", o: answer(409), retry: true, reason: ReasonRetryableStatus, wait: 100 * time.Millisecond, after: 15},
		{name: "429 Retry-After seconds", o: answer(429, "Retry-After", "2"), retry: true, reason: ReasonRetryAfter,
			wait: 2 * time.Second, retryAfter: 2 * time.Second, after: 15},
		{name: "503 Retry-After capped", o: answer(503, "Retry-After", "3600"), retry: true, reason: ReasonRetryAfter,
			wait: 30 * time.Second, retryAfter: time.Hour, after: 15},
		{name: "503 Retry-After date, from now", o: answer(503, "Retry-After", t0.Add(7*time.Second).Format(http.TimeFormat)),
			retry: true, reason: ReasonRetryAfter, wait: 7 * time.Second, retryAfter: 7 * time.Second, after: 15},
		{name: "500 ignores Retry-After", o: answer(500, "Retry-After", "9"), retry: true, reason: ReasonRetryableStatus,
			wait: 100 * time.Millisecond, after: 15},
		{name: "transport error costs double", o: failure(errReset), retry: true, reason: ReasonTransportError,
			wait: 100 * time.Millisecond, after: 10},
		{name: "attempt timeout", o: Outcome{Err: errReset, TimedOut: true}, retry: true, reason: ReasonAttemptTimeout,
			wait: 100 * time.Millisecond, after: 10},
		{name: "permanent error final, no refill", o: failure(&tls.CertificateVerificationError{Err: errReset}), tokens: 10,
			reason: ReasonPermanentError, after: 10},
		{name: "unsafe method without key", o: answer(503), st: State{UnsafeNoKey: true}, reason: ReasonNoKey, after: 20},
		{name: "body not replayable", o: answer(503), st: State{NotReplayable: true}, reason: ReasonBodyNotReplayable, after: 20},
		{name: "last attempt", o: answer(503), st: State{Attempt: 4}, reason: ReasonMaxAttempts, after: 20},
		{name: "one attempt allowed", o: answer(503), st: State{Attempt: 1, MaxAttempts: 1}, reason: ReasonMaxAttempts, after: 20},
		{name: "backoff stopped", o: answer(503), newBO: func() backoff.BackOff { return &backoff.StopBackOff{} },
			reason: ReasonBackoffStop, after: 20},
		{name: "wait would pass the deadline", o: answer(429, "Retry-After", "20"), st: State{Deadline: t0.Add(10 * time.Second)},
			reason: ReasonDeadline, retryAfter: 20 * time.Second, after: 20},
		{name: "wait ends before the deadline", o: answer(503), st: State{Deadline: t0.Add(time.Second)},
			retry: true, reason: ReasonRetryableStatus, wait: 100 * time.Millisecond, after: 15},
		{name: "wait ends at the deadline", o: answer(503), st: State{Deadline: t0.Add(100 * time.Millisecond)},
			reason: ReasonDeadline, after: 20},
		{name: "budget exhausted", o: failure(errReset), tokens: 9, reason: ReasonBudgetExhausted, after: 9},
		{name: "context done, classifier not asked", o: answer(503), st: State{Done: true}, classify: retryOn404,
			reason: ReasonContextDone, after: 20},
		{name: "context done on a final answer refills", o: answer(404), st: State{Done: true}, classify: retryOn404, tokens: 10,
			reason: ReasonContextDone, after: 11},
		{name: "classifier retries a 404", o: answer(404), classify: retryOn404, retry: true, reason: ReasonClassifier,
			wait: 100 * time.Millisecond, after: 15},
		{name: "classifier stops a 503, no refill", o: answer(503), classify: stop, tokens: 10, reason: ReasonClassifier, after: 10},
		{name: "classifier cannot lift the key veto", o: answer(404), st: State{UnsafeNoKey: true}, classify: retryOn404,
			tokens: 10, reason: ReasonNoKey, after: 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{MaxRetryAfter: 30 * time.Second, Classify: tt.classify, Budget: NewBudget(20, 5),
				NewBackoff: tt.newBO, Jitter: func(int64) int64 { return 0 }}
			if p.NewBackoff == nil {
				p.NewBackoff = func() backoff.BackOff { return backoff.NewConstantBackOff(100 * time.Millisecond) }
			}
			if tt.tokens > 0 {
				p.Budget.Spend(20 - tt.tokens)
			}
			st := tt.st
			if st.Attempt == 0 {
				st.Attempt = 3
			}
			if st.MaxAttempts == 0 {
				st.MaxAttempts = 4
			}
			spent := st.Spent
			v := p.Decide(tt.o, &st, func() time.Time { return t0 })
			if v.Retry != tt.retry || v.Reason != tt.reason || v.Wait != tt.wait || v.RetryAfter != tt.retryAfter {
				t.Errorf("verdict %+v; want retry=%v reason=%d wait=%v retry-after=%v", v, tt.retry, tt.reason, tt.wait, tt.retryAfter)
			}
			if got := p.Budget.Available(); got != tt.after {
				t.Errorf("budget %d after the decision, want %d", got, tt.after)
			}
			if tt.retry && st.Spent != spent+v.cost {
				t.Errorf("spent %d, want %d + the retry's %d", st.Spent, spent, v.cost)
			}
		})
	}
}

// TestDecideReadsNoClockForAFinalAnswer checks that only a planned retry
// reads the clock.
func TestDecideReadsNoClockForAFinalAnswer(t *testing.T) {
	p := Policy{NewBackoff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) }}
	calls := 0
	now := func() time.Time { calls++; return t0 }
	for _, o := range []Outcome{answer(201), answer(422), failure(&tls.CertificateVerificationError{Err: errReset})} {
		st := State{Attempt: 1, MaxAttempts: 4}
		p.Decide(o, &st, now)
	}
	st := State{Attempt: 1, MaxAttempts: 1}
	p.Decide(answer(503), &st, now)
	if calls != 0 {
		t.Fatalf("now called %d times for answers that are not retried", calls)
	}
	st = State{Attempt: 1, MaxAttempts: 2}
	if v := p.Decide(answer(503), &st, now); !v.Retry || calls != 1 {
		t.Fatalf("retry %v with %d clock reads, want a retry and 1", v.Retry, calls)
	}
}

// TestDecideSchedulePerOperation checks that the schedule is made at an
// operation's first retry and advances with each retry.
func TestDecideSchedulePerOperation(t *testing.T) {
	made := 0
	p := Policy{NewBackoff: func() backoff.BackOff {
		made++
		return backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0), backoff.WithMaxElapsedTime(0))
	}}
	now := func() time.Time { return t0 }
	for op := 0; op < 2; op++ {
		st := State{MaxAttempts: 4}
		var waits []time.Duration
		for st.Attempt = 1; ; st.Attempt++ {
			v := p.Decide(answer(503), &st, now)
			if !v.Retry {
				break
			}
			waits = append(waits, v.Wait)
		}
		if len(waits) != 3 || waits[0] != 100*time.Millisecond || waits[1] != 200*time.Millisecond || waits[2] != 400*time.Millisecond {
			t.Errorf("operation %d: waits %v", op+1, waits)
		}
	}
	if made != 2 {
		t.Errorf("%d schedules made for two operations", made)
	}
}

// TestDecideLongestWait checks that without Jitter the wait is the longest
// the jitter could give, so a caller drawing it later stays in the deadline.
func TestDecideLongestWait(t *testing.T) {
	p := Policy{MaxRetryAfter: 30 * time.Second,
		NewBackoff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }}
	for ra, want := range map[string]time.Duration{"10": 11 * time.Second, "29": 30 * time.Second, "3600": 30 * time.Second} {
		st := State{Attempt: 1, MaxAttempts: 2}
		if v := p.Decide(answer(429, "Retry-After", ra), &st, func() time.Time { return t0 }); v.Wait != want {
			t.Errorf("Retry-After %s: wait %v, want %v", ra, v.Wait, want)
		}
	}
}

func TestVeto(t *testing.T) {
	for _, tt := range []struct {
		o    Outcome
		want int64 // tokens after the veto
	}{
		{answer(503), 15}, // the cost goes back; a retryable answer refills nothing
		{answer(404), 16}, // a final answer refills one, as a return from Decide does
	} {
		p := Policy{Budget: NewBudget(20, 5), NewBackoff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) },
			Classify: func(*http.Request, *http.Response, error) Override { return Retry }}
		p.Budget.Spend(5)
		st := State{Attempt: 1, MaxAttempts: 4}
		v := p.Decide(tt.o, &st, func() time.Time { return t0 })
		if !v.Retry || p.Budget.Available() != 10 || st.Spent != 5 {
			t.Fatalf("%d: verdict %+v, %d tokens, spent %d", tt.o.Response.StatusCode, v, p.Budget.Available(), st.Spent)
		}
		v = p.Veto(v, tt.o, &st.Progress, ReasonBodyNotReplayable)
		if v.Retry || v.Reason != ReasonBodyNotReplayable || v.Wait != 0 || st.Spent != 0 || p.Budget.Available() != tt.want {
			t.Errorf("%d: after the veto %+v, spent %d, %d tokens; want %d", tt.o.Response.StatusCode, v, st.Spent, p.Budget.Available(), tt.want)
		}
	}
}

func TestBudget(t *testing.T) {
	if NewBudget(0, 5) != nil || NewBudget(-1, 5) != nil {
		t.Fatal("capacity <= 0 is no budget")
	}
	var none *Budget
	if !none.Spend(1000) || none.RetryCost(true) != 0 || none.Available() != -1 {
		t.Fatal("a nil budget allows every retry")
	}
	b := NewBudget(10, 0)
	if b.RetryCost(false) != 1 || b.RetryCost(true) != 2 {
		t.Fatalf("cost 0 is taken as 1: %d, %d", b.RetryCost(false), b.RetryCost(true))
	}
	if !b.Spend(10) || b.Spend(1) || b.Available() != 0 {
		t.Fatal("spend")
	}
	b.Succeeded(0)
	b.Refund(100)
	if b.Available() != 10 {
		t.Fatalf("refills past capacity: %d", b.Available())
	}
}
