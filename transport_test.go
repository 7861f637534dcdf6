package saferetry

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/google/uuid"

	"github.com/saferetry/saferetry/internal/testkit"
)

func TestCallerRequestNeverModified(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Fail(testkit.ErrReset), testkit.Status(201))
	tr, _, _ := testTransport(rc)
	ctx := context.WithValue(context.Background(), struct{}{}, "v")
	req := newReq(t, ctx, http.MethodPost, `{"amount":1500}`)
	req.Header.Set("X-Trace", "abc")
	req.Header["Multi"] = []string{"1", "2"}
	before := req.Header.Clone()
	url := *req.URL
	body, getBody, cl := req.Body, req.GetBody, req.ContentLength
	resp := mustRoundTrip(t, tr, req)
	if !reflect.DeepEqual(req.Header, before) || *req.URL != url || req.Context() != ctx ||
		req.Body != body || reflect.ValueOf(req.GetBody).Pointer() != reflect.ValueOf(getBody).Pointer() || req.ContentLength != cl {
		t.Fatalf("caller request modified: header %v", req.Header)
	}
	if resp.Request == req {
		t.Error("the caller's request was sent instead of a clone")
	}
	for i, s := range rc.Seen() {
		if s.Header.Get("X-Trace") != "abc" || len(s.Header["Multi"]) != 2 {
			t.Errorf("attempt %d lost caller headers: %v", i+1, s.Header)
		}
	}
}

func TestFinalResponsesReturnedWithoutError(t *testing.T) {
	for _, tt := range []struct {
		script []testkit.Outcome
		want   int
	}{
		{[]testkit.Outcome{{Status: 422, Body: "reused"}}, 422},
		{[]testkit.Outcome{{Status: 503, Body: "down"}}, 503},
		{[]testkit.Outcome{{Status: 400, Body: "bad"}}, 400},
	} {
		rc := testkit.NewRecorder(tt.script...)
		tr, _, _ := testTransport(rc, WithMaxAttempts(3))
		resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
		if err != nil || resp == nil || resp.StatusCode != tt.want {
			t.Fatalf("got %v, %v; want status %d and nil error", resp, err, tt.want)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != tt.script[0].Body {
			t.Errorf("body %q", b)
		}
		bodies := rc.Bodies()
		for i, tb := range bodies {
			if i < len(bodies)-1 && !tb.Closed() {
				t.Errorf("status %d: intermediate body %d not closed", tt.want, i+1)
			}
		}
	}
}

func TestBrokenBaseNeverLeaksResponseWithError(t *testing.T) {
	tb := &testkit.TrackedBody{Reader: strings.NewReader("x")}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: tb, Header: http.Header{}}, testkit.ErrReset
	})
	tr := NewTransport(base, WithMaxAttempts(1))
	resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if resp != nil || !errors.Is(err, ErrOutcomeUnknown) || !tb.Closed() {
		t.Fatalf("resp=%v err=%v closed=%v", resp, err, tb.Closed())
	}
	// A response without a Body gets http.NoBody: closing it, also through
	// the attempt timeout's wrapper, and draining it must not panic.
	noBody := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}}, nil
	})
	var calls atomic.Int32
	base2 := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		if calls.Add(1) == 1 {
			return noBody(r) // retried: drained and closed
		}
		return &http.Response{StatusCode: 201, Header: http.Header{}, Request: r}, nil
	})
	tr = NewTransport(base2, withClock(newFakeClock()), WithBackoff(constBackoff(time.Millisecond)),
		WithAttemptTimeout(time.Minute), WithMaxAttempts(2))
	resp, err = tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil || resp == nil || resp.Body == nil || resp.StatusCode != 201 {
		t.Fatalf("nil-Body base: resp=%v err=%v", resp, err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("closing the body: %v", err)
	}
	nilBoth := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	resp, err = NewTransport(nilBoth, WithMaxAttempts(1)).RoundTrip(newReq(t, context.Background(), http.MethodGet, ""))
	if resp != nil || err == nil {
		t.Fatalf("nil/nil base: resp=%v err=%v", resp, err)
	}
}

// plainBody has no GetBody once wrapped by http.NewRequest.
type plainBody struct {
	r      io.Reader
	closed atomic.Bool
	err    error
}

func (b *plainBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	return b.r.Read(p)
}
func (b *plainBody) Close() error { b.closed.Store(true); return nil }

// TestBodyBuffering: a body without GetBody is buffered up to
// WithMaxBufferedBody and replayed on a retry; a larger one is sent once,
// whole, and not retried. Either way the Transport closes it.
func TestBodyBuffering(t *testing.T) {
	tests := []struct {
		name             string
		size             int // of the body, in bytes
		attempts, status int
		reason           Reason // of the first attempt
	}{
		{"buffered and replayed", 1000, 2, 201, ReasonRetryableStatus},
		{"over the limit sent once, not retried", 1001, 1, 503, ReasonBodyNotReplayable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := strings.Repeat("p", tt.size)
			rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
			tr, _, hl := testTransport(rc, WithMaxBufferedBody(1000))
			pb := &plainBody{r: strings.NewReader(payload)}
			req, _ := http.NewRequest(http.MethodPost, "http://api.test/", pb)
			if req.GetBody != nil {
				t.Fatal("test needs a body without GetBody")
			}
			resp := mustRoundTrip(t, tr, req)
			s := rc.Seen()
			if len(s) != tt.attempts || resp.StatusCode != tt.status {
				t.Fatalf("status %d after %d attempts, want %d after %d", resp.StatusCode, len(s), tt.status, tt.attempts)
			}
			for i := range s {
				if s[i].Body != payload {
					t.Errorf("attempt %d sent %d bytes, not the %d-byte body", i+1, len(s[i].Body), len(payload))
				}
			}
			if r := hl.Attempts()[0].Reason; r != tt.reason {
				t.Errorf("reason %q, want %q", r, tt.reason)
			}
			if !pb.closed.Load() {
				t.Error("request body not closed")
			}
		})
	}
}

func TestBodyReadErrorClosesAndFails(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(201))
	tr, _, _ := testTransport(rc)
	pb := &plainBody{err: errors.New("disk on fire")}
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/", pb)
	resp, err := tr.RoundTrip(req)
	if resp != nil || !errors.Is(err, ErrNotSent) || !pb.closed.Load() || len(rc.Seen()) != 0 {
		t.Fatalf("resp=%v err=%v closed=%v sent=%d", resp, err, pb.closed.Load(), len(rc.Seen()))
	}
}

func TestGetBodyFailureReturnsLastResponse(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	tr, _, hl := testTransport(rc)
	req := newReq(t, context.Background(), http.MethodPost, "x")
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp := mustRoundTrip(t, tr, req)
	if resp.StatusCode != 503 || len(rc.Seen()) != 1 || hl.Attempts()[0].Reason != ReasonBodyNotReplayable {
		t.Fatalf("status %d after %d attempts, reason %q", resp.StatusCode, len(rc.Seen()), hl.Attempts()[0].Reason)
	}
}

func TestNilURL(t *testing.T) {
	pb := &plainBody{r: strings.NewReader("x")}
	_, err := NewTransport(nil).RoundTrip(&http.Request{Method: "POST", Body: pb, Header: http.Header{}})
	if !errors.Is(err, ErrNotSent) || !pb.closed.Load() {
		t.Fatalf("err=%v closed=%v", err, pb.closed.Load())
	}
}

// hijackServer answers 201 after the first drop requests, which it reads
// and then answers by closing the connection.
func hijackServer(t *testing.T, drop int) (*httptest.Server, *atomic.Int32, *sync.Map) {
	var n atomic.Int32
	keys := &sync.Map{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		i := n.Add(1)
		keys.Store(i, r.Header.Get(HeaderIdempotencyKey)+"|"+string(body))
		if int(i) <= drop {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "created")
	}))
	t.Cleanup(srv.Close)
	return srv, &n, keys
}

func TestNetworkFailureRetriedWithSameKey(t *testing.T) {
	srv, n, seen := hijackServer(t, 2)
	tr := NewTransport(srv.Client().Transport, WithBackoff(constBackoff(time.Millisecond)))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("debit 1500"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(b) != "created" || n.Load() < 3 {
		t.Fatalf("status %d body %q after %d server attempts", resp.StatusCode, b, n.Load())
	}
	first, _ := seen.Load(int32(1))
	seen.Range(func(k, v any) bool {
		if v != first {
			t.Errorf("attempt %v saw %q, attempt 1 saw %q", k, v, first)
		}
		return true
	})
	if k, _ := KeyFromResponse(resp); k == "" || !strings.HasPrefix(first.(string), k+"|") {
		t.Errorf("KeyFromResponse %q does not match the sent key %q", k, first)
	}
}

func TestNetworkFailureExhaustedIsOutcomeUnknown(t *testing.T) {
	srv, _, _ := hijackServer(t, 1<<30)
	tr := NewTransport(srv.Client().Transport, WithMaxAttempts(3), WithBackoff(constBackoff(time.Millisecond)))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("debit 1500"))
	req = req.WithContext(WithKey(req.Context(), "debit-1"))
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		t.Fatal("response with error")
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrOutcomeUnknown) || e.Key != "debit-1" || e.Attempts != 3 || e.Err == nil {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		var ne net.Error
		if !errors.As(err, &ne) {
			t.Errorf("last transport error not wrapped: %v", err)
		}
	}
}

func TestConnectionRefusedIsNotSent(t *testing.T) {
	tr := NewTransport(nil, WithMaxAttempts(2), WithBackoff(constBackoff(time.Millisecond)))
	req, _ := http.NewRequest(http.MethodPost, "http://"+testkit.RefusedAddr(t)+"/", strings.NewReader("x"))
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrNotSent", err)
	}
}

func TestDeadlineWhileServerHangsWrapsDeadlineExceeded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr := NewTransport(srv.Client().Transport)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
	_, err := tr.RoundTrip(req)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) || e.Attempts != 1 {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentOperations(t *testing.T) {
	var mu sync.Mutex
	perKey := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k := r.Header.Get(HeaderIdempotencyKey)
		mu.Lock()
		perKey[k] = append(perKey[k], string(body))
		n := len(perKey[k])
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	tr := NewTransport(srv.Client().Transport, WithBackoff(constBackoff(time.Millisecond)))
	const workers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				body := fmt.Sprintf("op-%d-%d", w, i)
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != 201 {
					errs <- fmt.Errorf("%s: status %d", body, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(perKey) != workers*each {
		t.Fatalf("%d distinct keys, want %d", len(perKey), workers*each)
	}
	for k, bodies := range perKey {
		if len(bodies) != 2 || bodies[0] != bodies[1] {
			t.Errorf("key %s saw %q", k, bodies)
		}
	}
}

func TestRetryBudget(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503))
	tr, _, hl := testTransport(rc, WithRetryBudget(20, 5), WithMaxAttempts(4))
	run := func() {
		mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
	}
	run() // 3 retries: 15 tokens
	run() // 1 retry: 5 tokens, then empty
	if got := tr.policy.Budget.Available(); got != 0 {
		t.Fatalf("tokens = %d, want 0", got)
	}
	before := len(rc.Seen())
	run()
	if len(rc.Seen())-before != 1 {
		t.Fatalf("exhausted budget still retried")
	}
	as := hl.Attempts()
	if last := as[len(as)-1]; last.Reason != ReasonBudgetExhausted || last.Decision != DecisionReturn {
		t.Fatalf("last attempt %+v", last)
	}
	if r := as[4].Reason; r != ReasonRetryableStatus { // op 2, attempt 1 was paid for
		t.Errorf("op 2 attempt 1 reason %q", r)
	}
	if r := as[5].Reason; r != ReasonBudgetExhausted {
		t.Errorf("op 2 attempt 2 reason %q", r)
	}
	// Successes refill it: one token per first-try success.
	rc.SetScript(testkit.Status(201))
	for i := 0; i < 7; i++ {
		run()
	}
	if got := tr.policy.Budget.Available(); got != 7 {
		t.Fatalf("tokens after 7 successes = %d, want 7", got)
	}
	// A retry after a transport error costs double.
	rc.Restart(testkit.Fail(testkit.ErrReset), testkit.Status(201))
	_, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if !errors.Is(err, ErrOutcomeUnknown) || len(rc.Seen()) != 1 {
		t.Fatalf("with 7 tokens a 10-token retry was made: err %v, attempts %d", err, len(rc.Seen()))
	}
	if got := tr.policy.Budget.Available(); got != 7 {
		t.Fatalf("tokens = %d, want 7", got)
	}
}

func TestRetryBudgetRefundsAfterSuccessfulRetry(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	tr, _, _ := testTransport(rc, WithRetryBudget(100, 5))
	resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
	if got := tr.policy.Budget.Available(); got != 100 {
		t.Fatalf("tokens = %d, want 100 (retry cost refunded)", got)
	}
	tr2, _, _ := testTransport(testkit.NewRecorder(testkit.Status(503)), WithRetryBudget(0, 5), WithMaxAttempts(10))
	resp, _ = tr2.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	closeResp(resp)
	if tr2.policy.Budget != nil {
		t.Fatal("capacity 0 should disable the budget")
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rc := testkit.NewRecorder(testkit.StatusH(429, "Retry-After", "1"), testkit.Status(201))
	tr, _, _ := testTransport(rc, WithLogger(logger))
	mustRoundTrip(t, tr, newReq(t, WithKey(context.Background(), "k-log"), http.MethodPost, "x"))
	sc := bufio.NewScanner(&buf)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 {
		t.Fatalf("log lines %q", lines)
	}
	for _, want := range []string{"level=INFO", "key=k-log", "attempt=1", "status=429", "decision=retry", `reason=retry-after`, "retry_after=1s", "wait="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line 1 %q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], "level=DEBUG") || !strings.Contains(lines[1], "decision=return") {
		t.Errorf("line 2 %q", lines[1])
	}
	// A nil logger is silent and does not panic.
	tr2, _, _ := testTransport(testkit.NewRecorder(testkit.Status(201)), WithLogger(nil))
	mustRoundTrip(t, tr2, newReq(t, context.Background(), http.MethodPost, "x"))
}

// TestLoggerWarnsWhenALimitStopsARetry: an operation that a limit stops
// on an outcome it would retry ends without success after a retryable
// outcome, and its last attempt is logged at Warn, as WithLogger says,
// also when the retry was the Classifier's: the operations that
// otelsaferetry counts as given up are never only at Debug.
func TestLoggerWarnsWhenALimitStopsARetry(t *testing.T) {
	retryAll := func(*http.Request, *http.Response, error) Decision { return DecisionRetry }
	for _, tc := range []struct {
		name   string
		status int
		opts   []Option
	}{
		{name: "retryable status", status: 503},
		{name: "classifier retries a 404", status: 404, opts: []Option{WithClassifier(retryAll)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			rc := testkit.NewRecorder(testkit.Status(tc.status))
			tr, _, _ := testTransport(rc, append(tc.opts, WithLogger(logger), WithMaxAttempts(2))...)
			mustRoundTrip(t, tr, newReq(t, WithKey(context.Background(), "k-limit"), http.MethodPost, "x"))
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("log lines %q, want 2", lines)
			}
			last := lines[1]
			if !strings.Contains(last, `reason="max attempts"`) || !strings.Contains(last, "level=WARN") {
				t.Errorf("last line %q, want the max attempts return at WARN", last)
			}
		})
	}
}

// TestLoggerWarnsWhenTheWaitIsInterrupted: an operation whose context
// ends while it waits to retry ends without success after a retryable
// outcome: after the Info line of the retry, one Warn line says so, with
// the reason otelsaferetry gives it, so that a log reader does not take
// the retry for one that was made.
func TestLoggerWarnsWhenTheWaitIsInterrupted(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	clk := newFakeClock()
	clk.hold = true
	clk.armed = make(chan time.Duration, 1)
	tr := NewTransport(mockBase(rc), withClock(clk), WithBackoff(constBackoff(time.Hour)), WithLogger(logger))
	ctx, cancel := context.WithCancel(WithKey(context.Background(), "k-cut"))
	go func() {
		<-clk.armed // the Transport is waiting now
		cancel()
	}()
	if _, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines %q, want the retry and the interruption", lines)
	}
	for _, want := range []string{"level=WARN", "key=k-cut", "attempts=1", `reason="context done"`, `error="context canceled`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line 2 %q lacks %q", lines[1], want)
		}
	}
}

func TestContextDoneBeforeSendIsNotSent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var called atomic.Bool
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		called.Store(true)
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, r.Context().Err()
	})
	body := &plainBody{r: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/", body)
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
	resp, err := NewTransport(base).RoundTrip(req)
	var e *Error
	if resp != nil || !errors.As(err, &e) || !errors.Is(err, ErrNotSent) || errors.Is(err, ErrOutcomeUnknown) ||
		!errors.Is(err, context.Canceled) || e.Attempts != 0 || e.Key == "" {
		t.Fatalf("resp=%v err=%v; want ErrNotSent wrapping context.Canceled, 0 attempts, the key", resp, err)
	}
	if called.Load() {
		t.Error("an attempt was sent with a done context")
	}
	if !body.closed.Load() {
		t.Error("request body not closed")
	}
}

func TestRetryBudgetStopsConcurrentStorm(t *testing.T) {
	// Every answer fails: across all goroutines the budget pays for exactly
	// capacity/cost retries, then every operation is tried once.
	rc := testkit.NewRecorder(testkit.Status(503))
	tr, _, hl := testTransport(rc, WithRetryBudget(100, 5), WithMaxAttempts(4))
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req, _ := http.NewRequest(http.MethodPost, "http://api.test/", strings.NewReader("x"))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				closeResp(resp)
			}
		}()
	}
	wg.Wait()
	retries, exhausted := 0, 0
	for _, a := range hl.Attempts() {
		switch {
		case a.Decision == DecisionRetry:
			retries++
		case a.Reason == ReasonBudgetExhausted:
			exhausted++
		}
	}
	if retries != 20 || len(rc.Seen()) != workers*each+20 || tr.policy.Budget.Available() != 0 {
		t.Fatalf("%d retries, %d attempts, %d tokens left; want 20 retries for %d operations", retries, len(rc.Seen()), tr.policy.Budget.Available(), workers*each)
	}
	if exhausted == 0 {
		t.Error("no attempt reported the exhausted budget")
	}
}

func TestURLWithoutHostIsFinalAndNotSent(t *testing.T) {
	var called atomic.Bool
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		called.Store(true)
		return nil, errors.New("http: no Host in request URL")
	})
	for _, u := range []string{"http:///v1/debits", "https:///v1/debits"} {
		pb := &plainBody{r: strings.NewReader("x")}
		req, _ := http.NewRequest(http.MethodPost, u, pb)
		resp, err := NewTransport(base, WithBackoff(constBackoff(time.Millisecond))).RoundTrip(req)
		var e *Error
		if resp != nil || !errors.As(err, &e) || !errors.Is(err, ErrNotSent) || e.Attempts != 0 || !pb.closed.Load() {
			t.Errorf("%s: resp=%v err=%v closed=%v; want ErrNotSent before any attempt", u, resp, err, pb.closed.Load())
		}
	}
	if called.Load() {
		t.Error("a request without a host was handed to the base")
	}
}

// rwBody is the read-write body net/http gives a 101 Switching Protocols.
type rwBody struct {
	io.Reader
	written bytes.Buffer
}

func (b *rwBody) Write(p []byte) (int, error) { return b.written.Write(p) }
func (b *rwBody) Close() error                { return nil }

func TestAttemptTimeoutKeepsSwitchedProtocolBodyWritable(t *testing.T) {
	rw := &rwBody{Reader: strings.NewReader("")}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{"Upgrade": {"websocket"}}, Body: rw, Request: r}, nil
	})
	tr := NewTransport(base, WithAttemptTimeout(time.Minute))
	resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodGet, ""))
	if err != nil {
		t.Fatal(err)
	}
	w, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body %T is not writable", resp.Body)
	}
	if _, err := w.Write([]byte("hi")); err != nil || rw.written.String() != "hi" {
		t.Fatalf("write: %v, %q", err, rw.written.String())
	}
	w.Close()
	if resp.Request.Context().Err() == nil {
		t.Error("closing the body did not end the attempt context")
	}
}

// TestRetryBudgetRefilledByFinalClientError checks the documented refill
// rule: any answer the rules do not retry (a 404 or 422 as much as a 201)
// refills the bucket, while a retryable answer that ends the operation
// (attempts exhausted) does not.
func TestRetryBudgetRefilledByFinalClientError(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(503))
	tr, _, _ := testTransport(rc, WithRetryBudget(20, 5), WithMaxAttempts(2))
	run := func() {
		t.Helper()
		mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
	}
	run() // 503, one retry (5 tokens), 503: no refill
	if got := tr.policy.Budget.Available(); got != 15 {
		t.Fatalf("tokens = %d, want 15", got)
	}
	for _, code := range []int{404, 422} {
		rc.SetScript(testkit.Status(code))
		before := tr.policy.Budget.Available()
		run()
		if got := tr.policy.Budget.Available(); got != before+1 {
			t.Fatalf("after a final %d: tokens = %d, want %d", code, got, before+1)
		}
	}
}

// headerWriter is a base that adds to and replaces header values of the
// request it is given, as an instrumenting RoundTripper might (against the
// RoundTripper contract), then answers 503 until the last attempt.
type headerWriter struct {
	mu   sync.Mutex
	seen []http.Header
}

func (hw *headerWriter) RoundTrip(r *http.Request) (*http.Response, error) {
	hw.mu.Lock()
	hw.seen = append(hw.seen, r.Header.Clone())
	n := len(hw.seen)
	hw.mu.Unlock()
	r.Header.Add("Multi", "added")
	r.Header.Set("X-Trace", "replaced")
	code := http.StatusServiceUnavailable
	if n == 3 {
		code = http.StatusCreated
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// The attempts share the caller's header values rather than copying them;
// a base that appends to or replaces a value must still change neither the
// caller's request nor what the next attempt sends.
func TestSharedHeaderValuesStayTheCallers(t *testing.T) {
	hw := &headerWriter{}
	tr := NewTransport(hw, withClock(newFakeClock()), WithBackoff(constBackoff(time.Millisecond)))
	req := newReq(t, context.Background(), http.MethodPost, `{"amount":1500}`)
	multi := make([]string, 2, 8) // spare capacity an append could write into
	multi[0], multi[1] = "1", "2"
	req.Header["Multi"] = multi
	req.Header.Set("X-Trace", "abc")
	mustRoundTrip(t, tr, req)
	if len(hw.seen) != 3 {
		t.Fatalf("attempts = %d, want 3", len(hw.seen))
	}
	for i, h := range hw.seen {
		if got := h["Multi"]; len(got) != 2 || got[0] != "1" || got[1] != "2" || h.Get("X-Trace") != "abc" {
			t.Errorf("attempt %d sent Multi %q X-Trace %q: an earlier attempt's writes leaked", i+1, got, h.Get("X-Trace"))
		}
	}
	if got := req.Header["Multi"]; len(got) != 2 || multi[:3][2] != "" || req.Header.Get("X-Trace") != "abc" {
		t.Errorf("caller's header changed: Multi %q (spare slot %q), X-Trace %q", got, multi[:3][2], req.Header.Get("X-Trace"))
	}
}

// The Transport's own cost for a POST answered at once is at most five
// allocations beyond what the caller's request and the base cost, over a
// canned base and over net/http's Transport (the canned base registered
// for "http" in it): the operation (which holds the connection trace, is
// the context that carries it, and holds the key header's value and a
// generated key's text, and the first attempt's request), the trace's two
// hooks, and the attempt's header map (two). The trace tells a request written before a failed
// re-dial from one never sent (see
// TestWrittenThenRedialRefusedIsOutcomeUnknown), by its GotConn hook, and
// an attempt that got no connection from one that may have been sent,
// whatever its error (see TestFinalErrorClass), by its GetConn hook; it
// cost two more allocations when it had a context and the key a text of
// their own, and a cheaper sign than the trace was tried and given up
// (see retrypolicy.Written).
func TestTransportOverheadAllocations(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody}
	canned := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	netHTTP := &http.Transport{}
	netHTTP.RegisterProtocol("http", canned)
	payload := []byte(`{"amount":1500}`)
	newPost := func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", bytes.NewReader(payload))
		return req
	}
	for _, c := range []struct {
		name string
		base http.RoundTripper
		max  float64
	}{{"net/http", netHTTP, 5}, {"a canned base", canned, 5}} {
		tr := NewTransport(c.base)
		direct := testing.AllocsPerRun(200, func() { _, _ = c.base.RoundTrip(newPost()) })
		through := testing.AllocsPerRun(200, func() {
			if r, err := tr.RoundTrip(newPost()); err != nil || r.StatusCode != http.StatusCreated {
				t.Fatal(err)
			}
		})
		if own := through - direct; own > c.max {
			t.Errorf("over %s, the Transport allocates %.0f times per operation, want at most %.0f", c.name, own, c.max)
		}
	}
}

// TestEndedOperationKeepsNoRequest: what outlives a RoundTrip (a response,
// whose Request holds the attempts' context, which is the operation, and
// an *Error, whose Key is the text of a generated key, kept in the
// operation) must not keep the caller's request in memory. (A response's
// Request is the attempt's clone, which keeps the body it sent and its
// GetBody, as net/http's own clones do.) The key must stay what was sent.
func TestEndedOperationKeepsNoRequest(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			var sent string
			var attempt weak.Pointer[http.Request]
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				// A copy: the header's value is the text the operation
				// holds, which would keep it.
				sent = strings.Clone(r.Header.Get(HeaderIdempotencyKey))
				attempt = weak.Make(r)
				_, _ = io.Copy(io.Discard, r.Body)
				if fail {
					return nil, errors.New("connection reset")
				}
				return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			})
			tr := NewTransport(base, WithMaxAttempts(1))
			// A body without GetBody, which the Transport buffers.
			req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", io.MultiReader(strings.NewReader(`{"amount":1500}`)))
			callers := weak.Make(req)
			resp, err := tr.RoundTrip(req)
			req = nil
			runtime.GC()
			if callers.Value() != nil {
				t.Error("the caller's request is still in memory after the operation ended")
			}
			// A failed operation's error keeps neither the attempt's
			// request nor, through it, the buffered body.
			if fail && attempt.Value() != nil {
				t.Error("the failed operation's error keeps its attempt's request in memory")
			}
			var key string
			if fail {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v, want an *Error", err)
				}
				key = e.Key
			} else {
				if err != nil {
					t.Fatal(err)
				}
				key, _ = KeyFromResponse(resp)
			}
			if _, err := NewKey(); err != nil { // another key drawn in between
				t.Fatal(err)
			}
			if u, err := uuid.Parse(key); err != nil || key != sent || u.Version() != 4 || u.String() != key {
				t.Fatalf("the operation's key is %q, sent %q; want the same UUIDv4 (%v)", key, sent, err)
			}
			runtime.KeepAlive(resp)
		})
	}
}

// TestWrittenThenRedialRefusedIsOutcomeUnknown: a keyed POST written on a
// reused keep-alive connection, executed by the server, which then goes
// down before it answers. net/http retries a request with an
// Idempotency-Key on a new connection by itself, and that dial is refused:
// the error RoundTrip sees is a dial error, yet the request was sent, so
// the operation must end in ErrOutcomeUnknown, never ErrNotSent (which
// tells the caller that nothing happened). Found by a review helper. The
// trace must reach net/http with every kind of body (one with its own
// GetBody, one the Transport buffers, none) and through bases that send a
// body and GetBody of their own, directly or as a protocol registered in
// net/http's Transport (two reviews found that a GetBody sign missed
// both); through the Transport and Client.Do.
func TestWrittenThenRedialRefusedIsOutcomeUnknown(t *testing.T) {
	bodies := map[string]func() io.Reader{
		"GetBody":  func() io.Reader { return strings.NewReader(`{"amount":1500}`) },
		"buffered": func() io.Reader { return io.MultiReader(strings.NewReader(`{"amount":1500}`)) },
		"none":     func() io.Reader { return nil },
	}
	bases := map[string]func(*http.Transport) http.RoundTripper{
		"net/http":   func(h *http.Transport) http.RoundTripper { return h },
		"signing":    func(h *http.Transport) http.RoundTripper { return testkit.SigningBase{Next: h} },
		"registered": testkit.RegisteredSigning,
	}
	vias := map[string]func(http.RoundTripper) func(*http.Request) (*http.Response, error){
		"Transport": func(base http.RoundTripper) func(*http.Request) (*http.Response, error) {
			return NewTransport(base, WithBackoff(constBackoff(time.Millisecond))).RoundTrip
		},
		"Client": func(base http.RoundTripper) func(*http.Request) (*http.Response, error) {
			return NewClient(WithBase(base), WithBackoff(constBackoff(time.Millisecond))).Do
		},
	}
	for bodyName, body := range bodies {
		for baseName, base := range bases {
			for via, do := range vias {
				t.Run(bodyName+"/"+baseName+"/"+via, func(t *testing.T) {
					url, executed := testkit.ExecuteThenGoDown(t)
					h := &http.Transport{}
					defer h.CloseIdleConnections()
					testkit.WarmUp(t, h, url)
					req, _ := http.NewRequest(http.MethodPost, url+"/payments", body())
					resp, err := do(base(h))(req)
					wantExecutedOutcomeUnknown(t, executed, resp, err)
				})
			}
		}
	}
}

// TestLaterAttemptWithoutBodyIsTraced: an operation whose first attempt
// has a body (an empty reader) and whose GetBody gives none (http.NoBody
// or nil) for the later ones. Attempt 1's dial is refused: not sent.
// Meanwhile the server comes back and a request of the same process
// leaves a keep-alive connection. Attempt 2 is written on it and executed,
// the server goes down before it answers, and net/http's own resend is
// refused. Every error is a dial error: only the connection trace tells
// that attempt 2 was written, or the executed payment is reported
// ErrNotSent. A review helper found it against a GetBody sign, which
// attempt 2, without a body, does not give.
func TestLaterAttemptWithoutBodyIsTraced(t *testing.T) {
	for name, again := range map[string]io.ReadCloser{"NoBody": http.NoBody, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			url, executed := testkit.ExecuteThenGoDown(t)
			refused := testkit.RefusedAddr(t)
			var down atomic.Bool
			down.Store(true)
			base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if down.Load() {
					addr = refused
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}
			defer base.CloseIdleConnections()
			tr := NewTransport(base, WithBackoff(constBackoff(time.Millisecond)), WithMaxAttempts(3),
				WithHook(func(a Attempt) {
					if a.Number == 1 {
						down.Store(false)
						testkit.WarmUp(t, base, url)
					}
				}))
			req, _ := http.NewRequest(http.MethodPost, url+"/payments", nil)
			req.Body = io.NopCloser(strings.NewReader(""))
			req.GetBody = func() (io.ReadCloser, error) { return again, nil }
			resp, err := tr.RoundTrip(req)
			wantExecutedOutcomeUnknown(t, executed, resp, err)
		})
	}
}

// wantExecutedOutcomeUnknown checks the end of an operation that the
// server executed once and never answered: ErrOutcomeUnknown, not
// ErrNotSent. It closes resp, if any.
func wantExecutedOutcomeUnknown(t *testing.T, executed *atomic.Int32, resp *http.Response, err error) {
	t.Helper()
	if resp != nil {
		resp.Body.Close()
	}
	if executed.Load() != 1 {
		t.Fatalf("executions = %d, want 1 (err = %v)", executed.Load(), err)
	}
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotSent) {
		t.Errorf("the server executed the payment, yet err = %v", err)
	}
}

// TestNonCanonicalKeyHeaderRefused: a key assigned to the header map under
// another spelling of its name ("idempotency-key") is one net/http sends
// as it is; a client that did not see it added a generated key beside it,
// and the server read two keys (the middleware answers 400, another server
// may take the generated one, making every resend a new operation). It is
// refused before anything is sent, with ErrInvalidKey, through the
// Transport and Client.Do alike. Found by a review helper.
func TestNonCanonicalKeyHeaderRefused(t *testing.T) {
	url, sent := testkit.CountingServer(t)
	for name, do := range map[string]func(*http.Request) (*http.Response, error){
		"Transport": NewTransport(nil).RoundTrip,
		"Client":    NewClient().Do,
	} {
		for _, extra := range [][]string{nil, {"order-42-debit"}} {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
			req.Header["idempotency-key"] = []string{"order-42-debit"}
			if extra != nil {
				req.Header[HeaderIdempotencyKey] = extra // the same key under both names
			}
			resp, err := do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("%s, canonical entry %q too: err = %v; want ErrInvalidKey", name, extra, err)
			}
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("the server got %d requests; want none", n)
	}
}

// TestBodyBufferingHonoursDeadline: a body without GetBody (a pipe, a
// streaming upload) is buffered before the first attempt; a producer that
// stalls must not hold RoundTrip past the context's deadline, as net/http's
// own Transport does not. RoundTrip ends with ErrNotSent and the
// deadline's error. Found by a review helper.
func TestBodyBufferingHonoursDeadline(t *testing.T) {
	url, sent := testkit.CountingServer(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"amount":15`)) }() // the rest never comes
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	done := make(chan error, 1)
	go func() {
		resp, err := NewTransport(nil).RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotSent) || sent.Load() != 0 {
			t.Errorf("err = %v, %d requests sent; want ErrNotSent with context.DeadlineExceeded, nothing sent", err, sent.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip still blocked 5 s after its context's 50 ms deadline")
	}
}

// TestDrainDuringTheWait: the answer of an attempt that is retried is
// drained during the wait, not before it: an error body that trickles in
// (here 150 ms, against a wait of 100 ms and a deadline of 200 ms) made the
// wait end past the deadline, so the operation failed with the deadline's
// error where the contract returns the last outcome. Found by a review
// helper.
func TestDrainDuringTheWait(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		attempts.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		time.Sleep(150 * time.Millisecond) // the error body trickles in
		_, _ = io.WriteString(w, "overloaded\n")
	}))
	defer srv.Close()
	tr := NewTransport(nil, WithBackoff(constBackoff(100*time.Millisecond)))
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("err = %v; want the last outcome, a 503", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || attempts.Load() != 2 {
		t.Errorf("status %d after %d attempts; want 503 after 2", resp.StatusCode, attempts.Load())
	}
}

// TestCallerTraceCalledOncePerEvent: the Transport's connection trace
// takes in a trace the caller put in the request's context; the caller's
// hooks are called once per event of each attempt, no more (a trace taken
// in twice would call them twice) and no fewer, with and without a body,
// with a per-attempt timeout, across a retry.
func TestCallerTraceCalledOncePerEvent(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // retried once
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	bodies := map[string]func() io.Reader{
		"none":     func() io.Reader { return nil },
		"GetBody":  func() io.Reader { return strings.NewReader(`{"amount":1500}`) },
		"buffered": func() io.Reader { return io.MultiReader(strings.NewReader(`{"amount":1500}`)) },
	}
	for name, body := range bodies {
		for _, timeout := range []time.Duration{0, 5 * time.Second} {
			t.Run(fmt.Sprintf("%s/timeout=%v", name, timeout), func(t *testing.T) {
				hits.Store(0)
				base := &http.Transport{}
				defer base.CloseIdleConnections()
				c := NewClient(WithBase(base), WithBackoff(constBackoff(time.Millisecond)), WithAttemptTimeout(timeout))
				var getConn, gotConn, wrote atomic.Int32
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GetConn:      func(string) { getConn.Add(1) },
					GotConn:      func(httptrace.GotConnInfo) { gotConn.Add(1) },
					WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
				})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body())
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				n := hits.Load()
				if got := [3]int32{getConn.Load(), gotConn.Load(), wrote.Load()}; n != 2 || got != [3]int32{n, n, n} {
					t.Errorf("the server saw %d requests (want 2); the caller's GetConn, GotConn, WroteRequest ran %v times", n, got)
				}
			})
		}
	}
}
