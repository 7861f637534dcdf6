package saferetryablehttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/jarcoal/httpmock"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// newRetryable returns a retryablehttp client whose HTTP client answers from
// rc through httpmock's ActivateNonDefault, configured by
// Configure. These tests share httpmock's default transport
// and so do not run in parallel.
func newRetryable(t *testing.T, rc *testkit.Recorder, opts ...Option) *retryablehttp.Client {
	return newRetryableWith(t, rc, nil, opts...)
}

// newRetryableWith is newRetryable with setup, if not nil, run on the
// client before Configure, to set what Configure wraps.
func newRetryableWith(t *testing.T, rc *testkit.Recorder, setup func(*retryablehttp.Client), opts ...Option) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin = time.Millisecond
	c.RetryWaitMax = 4 * time.Millisecond
	c.RetryMax = 3
	httpmock.ActivateNonDefault(c.HTTPClient)
	httpmock.RegisterNoResponder(rc.Respond)
	orig := c.HTTPClient
	t.Cleanup(func() {
		httpmock.DeactivateNonDefault(orig)
		httpmock.Reset()
	})
	if setup != nil {
		setup(c)
	}
	Configure(c, append([]Option{WithMaxRetryAfter(20 * time.Millisecond)}, opts...)...)
	return c
}

func rhReq(t *testing.T, ctx context.Context, method, body string) *retryablehttp.Request {
	t.Helper()
	var b any
	if body != "" {
		b = []byte(body)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, "http://api.test/v1/debits", b)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// mustDo sends req through c and closes the body of the response, which it
// returns; it fails t if c returns an error instead.
func mustDo(t *testing.T, c *retryablehttp.Client, req *retryablehttp.Request) *http.Response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("Do: %v, want a response", err)
	}
	resp.Body.Close()
	return resp
}

func TestRetryableKeyStableAcrossRetries(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.StatusH(409, "Retry-After", "1"), testkit.Fail(testkit.ErrReset), testkit.Outcome{Status: 201, Body: "ok"})
	c := newRetryable(t, rc)
	resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "debit 1500"))
	s := rc.Seen()
	if resp.StatusCode != 201 || len(s) != 4 {
		t.Fatalf("status %d after %d attempts", resp.StatusCode, len(s))
	}
	if len(s[0].Keys) != 1 {
		t.Fatalf("keys %q", s[0].Keys)
	}
	if u, err := uuid.Parse(s[0].Keys[0]); err != nil || u.Version() != 4 {
		t.Fatalf("key %q is not a UUIDv4", s[0].Keys[0])
	}
	for i, a := range s {
		if len(a.Keys) != 1 || a.Keys[0] != s[0].Keys[0] || a.Body != "debit 1500" {
			t.Errorf("attempt %d: keys %q body %q", i+1, a.Keys, a.Body)
		}
	}
	// A new request is a new operation with a new key.
	resp = mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "debit 1500"))
	if s := rc.Seen(); s[len(s)-1].Keys[0] == s[0].Keys[0] {
		t.Error("a new request reused the key")
	}
}

func TestRetryableFinalResponses(t *testing.T) {
	tests := []struct {
		name     string
		script   []testkit.Outcome
		want     int
		attempts int
	}{
		{"422 final", []testkit.Outcome{testkit.Status(422), testkit.Status(201)}, 422, 1},
		{"400 final", []testkit.Outcome{testkit.Status(400), testkit.Status(201)}, 400, 1},
		{"501 final", []testkit.Outcome{testkit.Status(501), testkit.Status(201)}, 501, 1},
		{"409 replayed final", []testkit.Outcome{testkit.StatusH(409, saferetry.HeaderReplayed, "true"), testkit.Status(201)}, 409, 1},
		{"409 retried", []testkit.Outcome{testkit.Status(409), testkit.Status(201)}, 201, 2},
		{"503 exhausted returns the response", []testkit.Outcome{testkit.Status(503)}, 503, 4},
		{"429 exhausted returns the response", []testkit.Outcome{testkit.StatusH(429, "Retry-After", "0")}, 429, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.script...)
			c := newRetryable(t, rc)
			resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
			if resp.StatusCode != tt.want || len(rc.Seen()) != tt.attempts {
				t.Fatalf("status %d after %d attempts, want %d after %d", resp.StatusCode, len(rc.Seen()), tt.want, tt.attempts)
			}
		})
	}
}

func TestRetryableRetryAfterCappedOn409(t *testing.T) {
	c := retryablehttp.NewClient()
	Configure(c, WithMaxRetryAfter(2*time.Second))
	for _, code := range []int{409, 429, 503} {
		resp := &http.Response{StatusCode: code, Header: http.Header{"Retry-After": {"3600"}}}
		if d := c.Backoff(time.Millisecond, 5*time.Millisecond, 0, resp); d < 1800*time.Millisecond || d > 2*time.Second {
			t.Errorf("%d: wait %v, want about the 2s cap", code, d)
		}
		resp.Header.Set("Retry-After", "1")
		if d := c.Backoff(time.Millisecond, 5*time.Millisecond, 0, resp); d < time.Second || d > 1100*time.Millisecond {
			t.Errorf("%d: wait %v, want about 1s", code, d)
		}
	}
	for attempt := 0; attempt < 6; attempt++ {
		d := c.Backoff(100*time.Millisecond, time.Second, attempt, &http.Response{StatusCode: 500, Header: http.Header{"Retry-After": {"9"}}})
		hi := min(100*time.Millisecond<<attempt, time.Second)
		if d < hi/2 || d > hi {
			t.Errorf("attempt %d: wait %v outside [%v, %v]", attempt, d, hi/2, hi)
		}
	}
}

func TestRetryableKeylessPostNotRetried(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	c := newRetryable(t, rc, WithKeyMethods())
	resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
	if resp.StatusCode != 503 || len(rc.Seen()) != 1 || len(rc.Seen()[0].Keys) != 0 {
		t.Fatalf("status %d after %d attempts, keys %q", resp.StatusCode, len(rc.Seen()), rc.Seen()[0].Keys)
	}
	rc2 := testkit.NewRecorder(testkit.Fail(testkit.ErrReset), testkit.Status(201))
	c2 := newRetryable(t, rc2, WithKeyMethods())
	_, err := c2.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
	if !errors.Is(err, saferetry.ErrOutcomeUnknown) || len(rc2.Seen()) != 1 {
		t.Fatalf("err %v after %d attempts", err, len(rc2.Seen()))
	}
}

func TestRetryableGetRetriedWithoutKey(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset), testkit.Status(503), testkit.Status(200))
	c := newRetryable(t, rc)
	resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodGet, ""))
	if resp.StatusCode != 200 || len(rc.Seen()) != 3 || len(rc.Seen()[0].Keys) != 0 {
		t.Fatalf("status %d after %d attempts", resp.StatusCode, len(rc.Seen()))
	}
}

func TestRetryableOutcomeUnknown(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
	c := newRetryable(t, rc, WithMaxAttempts(3))
	_, err := c.Do(rhReq(t, saferetry.WithKey(context.Background(), "op-9"), http.MethodPost, "x"))
	var e *saferetry.Error
	if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || !errors.Is(err, testkit.ErrReset) || e.Key != "op-9" || e.Attempts != 3 {
		t.Fatalf("err %v", err)
	}
	for i, s := range rc.Seen() {
		if len(s.Keys) != 1 || s.Keys[0] != "op-9" {
			t.Errorf("attempt %d keys %q", i+1, s.Keys)
		}
	}
	if strings.Contains(err.Error(), "giving up") {
		t.Errorf("retryablehttp's own error leaked: %v", err)
	}
}

// TestRetryableInvalidKeyNotSent: a supplied key the Transport refuses (a
// control character, a space at an edge) is refused here as there, and
// nothing is sent.
func TestRetryableInvalidKeyNotSent(t *testing.T) {
	for name, key := range map[string]string{"control character": "bad\x01key", "edge space": " order-8"} {
		t.Run(name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(201))
			c := newRetryable(t, rc)
			_, err := c.Do(rhReq(t, saferetry.WithKey(context.Background(), key), http.MethodPost, "x"))
			if !errors.Is(err, saferetry.ErrInvalidKey) || len(rc.Seen()) != 0 {
				t.Fatalf("err %v, sent %d; want ErrInvalidKey as from the Transport", err, len(rc.Seen()))
			}
		})
	}
}

func TestRetryableRedirectLoopIsFinal(t *testing.T) {
	rc := testkit.NewRecorder(testkit.StatusH(302, "Location", "http://api.test/v1/debits"))
	c := newRetryable(t, rc)
	resp, err := c.Do(rhReq(t, context.Background(), http.MethodGet, ""))
	if resp != nil || err == nil || len(rc.Seen()) != 10 {
		t.Fatalf("err %v after %d round trips, want one client attempt of 10 redirects", err, len(rc.Seen()))
	}
}

func TestRetryableKeepsPreviousHookAndBudget(t *testing.T) {
	c := retryablehttp.NewClient()
	c.Logger = nil
	var calls atomic.Int32
	c.RequestLogHook = func(_ retryablehttp.Logger, r *http.Request, _ int) {
		if r.Header.Get(saferetry.HeaderIdempotencyKey) != "" {
			calls.Add(1)
		}
	}
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, time.Millisecond
	rc := testkit.NewRecorder(testkit.Status(503))
	httpmock.ActivateNonDefault(c.HTTPClient)
	httpmock.RegisterNoResponder(rc.Respond)
	orig := c.HTTPClient
	t.Cleanup(func() { httpmock.DeactivateNonDefault(orig); httpmock.Reset() })
	Configure(c, WithMaxAttempts(4), WithRetryBudget(10, 5))
	if c.RetryMax != 3 {
		t.Fatalf("RetryMax = %d", c.RetryMax)
	}
	mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
	// The budget of 10 pays for two retries.
	if len(rc.Seen()) != 3 || calls.Load() != 3 {
		t.Fatalf("%d attempts, hook saw a key %d times", len(rc.Seen()), calls.Load())
	}
}

func TestRetryableClientTimeoutRetriedWithKey(t *testing.T) {
	// http.Client.Timeout makes net/http replace the attempt's error by its
	// own; the attempt must still be retried with its key and reported.
	for _, tt := range []struct {
		name  string
		hangs int // attempts that hang until the client's timeout
	}{{"second attempt answers", 1}, {"all time out", 1 << 30}} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(201))
			var n atomic.Int32
			c := newRetryable(t, rc, WithMaxAttempts(3))
			c.HTTPClient.Timeout = 30 * time.Millisecond
			httpmock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
				if int(n.Add(1)) <= tt.hangs {
					rc.Respond(r.Clone(context.Background()))
					<-r.Context().Done()
					return nil, r.Context().Err()
				}
				return rc.Respond(r)
			})
			resp, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
			s := rc.Seen()
			if tt.hangs == 1 {
				if err != nil || resp.StatusCode != 201 || len(s) != 2 {
					t.Fatalf("err %v after %d attempts; want 201 after 2", err, len(s))
				}
				resp.Body.Close()
			} else {
				var e *saferetry.Error
				if resp != nil || !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Attempts != 3 ||
					e.Key == "" || e.Key != s[0].Keys[0] || len(s) != 3 {
					t.Fatalf("resp %v err %v after %d attempts; want saferetry.ErrOutcomeUnknown with the key after 3", resp, err, len(s))
				}
			}
			for i, a := range s {
				if len(a.Keys) != 1 || a.Keys[0] != s[0].Keys[0] {
					t.Errorf("attempt %d keys %q", i+1, a.Keys)
				}
			}
		})
	}
}

func TestRetryableNotSentLikeTransport(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	rc := testkit.NewRecorder(testkit.Fail(refused))
	c := newRetryable(t, rc, WithMaxAttempts(3))
	_, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
	var e *saferetry.Error
	if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrNotSent) || errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Attempts != 3 || len(rc.Seen()) != 3 {
		t.Fatalf("err %v after %d attempts; want saferetry.ErrNotSent after 3 refused attempts", err, len(rc.Seen()))
	}
	// One attempt that may have arrived makes the testkit.Outcome unknown, even if
	// a later one was refused.
	rc2 := testkit.NewRecorder(testkit.Fail(testkit.ErrReset), testkit.Fail(refused))
	c2 := newRetryable(t, rc2, WithMaxAttempts(2))
	_, err = c2.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
	if !errors.Is(err, saferetry.ErrOutcomeUnknown) {
		t.Fatalf("err %v; want saferetry.ErrOutcomeUnknown", err)
	}
	// A context done before the first attempt sends nothing.
	rc3 := testkit.NewRecorder(testkit.Status(201))
	c3 := newRetryable(t, rc3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c3.Do(rhReq(t, ctx, http.MethodPost, "x"))
	if !errors.Is(err, saferetry.ErrNotSent) || !errors.Is(err, context.Canceled) || len(rc3.Seen()) != 0 {
		t.Fatalf("err %v, %d sent; want saferetry.ErrNotSent wrapping context.Canceled", err, len(rc3.Seen()))
	}
}

func TestRetryableBudgetRefundedAfterSuccessfulRetry(t *testing.T) {
	// As with Transport: a retry that leads to success is paid back, so a
	// budget of 10 (cost 5) affords two retries again for the next request.
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201), testkit.Status(503), testkit.Status(503), testkit.Status(503), testkit.Status(201))
	c := newRetryable(t, rc, WithRetryBudget(10, 5), WithMaxAttempts(4))
	for i, want := range []int{201, 503} {
		resp := mustDo(t, c, rhReq(t, context.Background(), http.MethodPost, "x"))
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if n := len(rc.Seen()); n != 5 {
		t.Fatalf("%d attempts, want 2 then 3 (two retries paid by the refunded budget)", n)
	}
}

func TestRetryableHeaderMapNotWritten(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	c := newRetryable(t, rc)
	shared := http.Header{"X-Trace": {"abc"}}
	req := rhReq(t, context.Background(), http.MethodPost, "x")
	req.Header = shared
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(shared) != 1 || shared.Get(saferetry.HeaderIdempotencyKey) != "" {
		t.Fatalf("the caller's header map was written: %v", shared)
	}
	s := rc.Seen()
	if len(s) != 2 || s[0].Header.Get("X-Trace") != "abc" || len(s[0].Keys) != 1 {
		t.Fatalf("attempts %+v", s)
	}
	// The request now carries its key: doing it again repeats the operation.
	if got := req.Header.Get(saferetry.HeaderIdempotencyKey); got != s[0].Keys[0] {
		t.Fatalf("request header key %q, want %q", got, s[0].Keys[0])
	}
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := rc.Seen(); len(s) != 3 || s[2].Keys[0] != s[0].Keys[0] {
		t.Fatalf("a repeated request changed key: %+v", s)
	}
}

func TestRetryableURLWithoutHostIsFinal(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(201))
	c := newRetryable(t, rc)
	req, err := retryablehttp.NewRequest(http.MethodGet, "http:///v1/debits", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(req)
	if !errors.Is(err, saferetry.ErrNotSent) || len(rc.Seen()) != 0 {
		t.Fatalf("err %v after %d attempts; want saferetry.ErrNotSent at once", err, len(rc.Seen()))
	}
}

func TestRetryableNoWaitPastDeadline(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script testkit.Outcome
		long   func(c *retryablehttp.Client)
	}{
		{"backoff", testkit.Status(503), func(c *retryablehttp.Client) { c.RetryWaitMin, c.RetryWaitMax = time.Hour, time.Hour }},
		{"retry-after", testkit.StatusH(429, "Retry-After", "3600"), func(*retryablehttp.Client) {}},
		{"transport error", testkit.Fail(testkit.ErrReset), func(c *retryablehttp.Client) { c.RetryWaitMin, c.RetryWaitMax = time.Hour, time.Hour }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.script, testkit.Status(201))
			c := newRetryable(t, rc, WithMaxRetryAfter(time.Hour))
			tt.long(c)
			// Without the check, retryablehttp would wait out the deadline
			// and return the bare context error.
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			resp, err := c.Do(rhReq(t, ctx, http.MethodPost, "x"))
			if len(rc.Seen()) != 1 {
				t.Fatalf("%d attempts", len(rc.Seen()))
			}
			if tt.script.Err != nil {
				var e *saferetry.Error
				if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Key == "" || e.Attempts != 1 {
					t.Fatalf("err %v; want saferetry.ErrOutcomeUnknown with the key at once", err)
				}
				return
			}
			if err != nil || resp.StatusCode != tt.script.Status {
				t.Fatalf("err %v; want the %d at once", err, tt.script.Status)
			}
			resp.Body.Close()
		})
	}
}
