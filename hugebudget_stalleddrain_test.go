// Tests of what a Transport does at its limits: a retried answer whose body
// stalls, and retry budgets near the int64 range.

package saferetry

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestStalledRetriedAnswerDoesNotHoldTheOutcome: the body of a retried
// answer that stops arriving (a 503 whose body the server never ends) must
// not keep the operation from returning the next attempt's answer, with no
// deadline on the request and no per-attempt timeout either: the drain is
// ended once its wait is over.
func TestStalledRetriedAnswerDoesNotHoldTheOutcome(t *testing.T) {
	srv, attempts, _ := stalledFirst(t)
	tr := NewTransport(nil, WithBackoff(constBackoff(time.Millisecond)))
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"amount":1500}`))
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("err = %v; want the second attempt's 201", r.err)
		}
		r.resp.Body.Close()
		if r.resp.StatusCode != http.StatusCreated || attempts.Load() != 2 {
			t.Errorf("status %d after %d attempts; want 201 after 2", r.resp.StatusCode, attempts.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("RoundTrip has not returned 5s after the server answered attempt %d; it waits for the drain of the stalled 503", attempts.Load())
	}
}

// TestStalledRetriedAnswerIsLetGo: the drain of a retried answer whose
// body stops arriving, with no deadline on the request and no per-attempt
// timeout, which the operation leaves behind when it returns, still ends
// once its time limit has passed: the body is closed, so that the server sees
// the connection go, and the drain's goroutine ends. Time is fake: only
// the clock's Advance passes the limit.
func TestStalledRetriedAnswerIsLetGo(t *testing.T) {
	srv, attempts, letGo := stalledFirst(t)
	clk := clock.NewManual(time.Now())
	tr := NewTransport(nil, withClock(clk), WithBackoff(constBackoff(0)))
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"amount":1500}`))
	if resp := mustRoundTrip(t, tr, req); resp.StatusCode != http.StatusCreated || attempts.Load() != 2 {
		t.Fatalf("status %d after %d attempts; want 201 after 2", resp.StatusCode, attempts.Load())
	}
	clk.Advance(time.Minute) // well past the drain's limit
	select {
	case <-letGo:
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled 503's connection is still held a minute (of fake time) later")
	}
	for deadline := time.Now().Add(5 * time.Second); drainRunning(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the drain of the stalled 503 still runs 5s after its body was closed")
		}
	}
}

// stalledFirst starts a server, closed at the end of t, that answers its
// first request with a 503 whose body stops after a few bytes, and the
// next ones with a 201; it returns the count of requests so far, and a
// channel closed when the 503's connection is gone.
func stalledFirst(t *testing.T) (srv *httptest.Server, attempts *atomic.Int32, gone <-chan struct{}) {
	attempts = new(atomic.Int32)
	letGo, release := make(chan struct{}), make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if attempts.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "overloa")
			w.(http.Flusher).Flush()
			select { // the rest of the body never comes
			case <-r.Context().Done():
				close(letGo)
			case <-release:
			}
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // first: srv.Close waits for the handler
	return srv, attempts, letGo
}

// drainRunning reports whether a goroutine is in retrypolicy.Drain.
func drainRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "retrypolicy.Drain(")
}

// TestHugeRetryCostIsNeverAfforded: a retry after a transport error costs
// twice the configured cost; a cost so large that twice it does not fit in
// an int64 must still be more than the bucket holds, not wrap around to a
// negative price that adds tokens past the capacity.
func TestHugeRetryCostIsNeverAfforded(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset), testkit.Status(http.StatusCreated))
	tr, _, hl := testTransport(rc, WithRetryBudget(100, math.MaxInt))
	_, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if err == nil || len(rc.Seen()) != 1 {
		t.Errorf("err = %v after %d attempts; want the reset after 1: the retry costs more than the bucket", err, len(rc.Seen()))
	}
	if as := hl.Attempts(); len(as) == 0 || as[0].Reason != ReasonBudgetExhausted {
		t.Errorf("attempts %+v; want the first to end with %q", as, ReasonBudgetExhausted)
	}
	if got := tr.policy.Budget.Available(); got != 100 {
		t.Errorf("%d tokens left; want the capacity, 100", got)
	}
}

// TestRefundNeverWrapsTheBucket: with a huge budget, an operation that
// spent nearly all of it and then succeeds gives its cost back; another
// operation's success having put a token back meanwhile, the refund must
// fill the bucket to its capacity, not wrap it around to a negative count
// that refuses every later retry.
func TestRefundNeverWrapsTheBucket(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(http.StatusServiceUnavailable), testkit.Status(http.StatusOK),
		testkit.Status(http.StatusCreated), testkit.Status(http.StatusServiceUnavailable), testkit.Status(http.StatusCreated))
	var tr *Transport
	var nested atomic.Bool
	hook := func(a Attempt) {
		// While the first operation waits for its retry, another one
		// succeeds at once and puts its token back.
		if a.Decision == DecisionRetry && nested.CompareAndSwap(false, true) {
			mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodGet, ""))
		}
	}
	tr, _, _ = testTransport(rc, WithRetryBudget(math.MaxInt, math.MaxInt), WithHook(hook))
	if resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x")); resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d; want 201 after a retry", resp.StatusCode)
	}
	if got := tr.policy.Budget.Available(); got != math.MaxInt64 {
		t.Errorf("%d tokens left; want the capacity, %d", got, int64(math.MaxInt64))
	}
	// The bucket is full: a 503 is retried again.
	if resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x")); resp.StatusCode != http.StatusCreated || len(rc.Seen()) != 5 {
		t.Errorf("status %d after %d attempts in all; want 201 after 5", resp.StatusCode, len(rc.Seen()))
	}
}
