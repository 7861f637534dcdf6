package saferetryablehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
)

// reviewAnswer is what the test server answers to one attempt.
type reviewAnswer struct {
	status int
	header []string // name, value pairs
}

// reviewServer answers attempt i with script[i] (the last one repeated) and
// records each attempt's key and body.
type reviewServer struct {
	mu     sync.Mutex
	script []reviewAnswer
	keys   []string
	bodies []string
}

func (s *reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.keys)
	s.keys = append(s.keys, r.Header.Get(saferetry.HeaderIdempotencyKey))
	s.bodies = append(s.bodies, string(b))
	a := s.script[min(n, len(s.script)-1)]
	s.mu.Unlock()
	for i := 0; i+1 < len(a.header); i += 2 {
		w.Header().Set(a.header[i], a.header[i+1])
	}
	w.WriteHeader(a.status)
}

func (s *reviewServer) seen() (keys, bodies []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...), append([]string(nil), s.bodies...)
}

// reviewOutcome is what a client got.
type reviewOutcome struct {
	attempts int
	status   int    // final status, 0 for an error
	cause    string // the error's cause, "" for a response
}

func (o reviewOutcome) String() string {
	if o.cause != "" {
		return fmt.Sprintf("%d attempts, error %s", o.attempts, o.cause)
	}
	return fmt.Sprintf("%d attempts, status %d", o.attempts, o.status)
}

func causeOf(err error) string {
	switch {
	case errors.Is(err, saferetry.ErrOutcomeUnknown):
		return "outcome unknown"
	case errors.Is(err, saferetry.ErrNotSent):
		return "not sent"
	}
	return "other: " + err.Error()
}

// reviewRun sends one POST through both clients, each against a fresh
// server with the script, and returns what each got.
func reviewRun(t *testing.T, script []reviewAnswer, timeout time.Duration) (transport, adapter reviewOutcome) {
	t.Helper()
	run := func(do func(ctx context.Context, url string) (*http.Response, error)) reviewOutcome {
		s := &reviewServer{script: script}
		srv := httptest.NewServer(s)
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := do(ctx, srv.URL)
		keys, bodies := s.seen()
		for i := range keys {
			if keys[i] == "" || keys[i] != keys[0] || bodies[i] != "payload" {
				t.Errorf("attempt %d: key %q body %q; first key %q", i+1, keys[i], bodies[i], keys[0])
			}
		}
		o := reviewOutcome{attempts: len(keys)}
		if err != nil {
			o.cause = causeOf(err)
			return o
		}
		resp.Body.Close()
		o.status = resp.StatusCode
		return o
	}
	transport = run(func(ctx context.Context, url string) (*http.Response, error) {
		tr := saferetry.NewTransport(nil, saferetry.WithMaxAttempts(3),
			saferetry.WithMaxRetryAfter(50*time.Millisecond),
			saferetry.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) }))
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("payload"))
		return tr.RoundTrip(req)
	})
	adapter = run(func(ctx context.Context, url string) (*http.Response, error) {
		c := retryablehttp.NewClient()
		c.Logger = nil
		c.RetryWaitMin, c.RetryWaitMax = 2*time.Millisecond, 2*time.Millisecond
		Configure(c, WithMaxAttempts(3), WithMaxRetryAfter(50*time.Millisecond))
		defer c.HTTPClient.CloseIdleConnections()
		req, _ := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, url, []byte("payload"))
		return c.Do(req)
	})
	return transport, adapter
}

func TestRetryDecisionTable(t *testing.T) {
	a := func(status int, kv ...string) reviewAnswer { return reviewAnswer{status, kv} }
	date := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	for _, tt := range []struct {
		name    string
		script  []reviewAnswer
		timeout time.Duration
		want    reviewOutcome
	}{
		{"201", []reviewAnswer{a(201)}, 0, reviewOutcome{1, 201, ""}},
		{"400", []reviewAnswer{a(400)}, 0, reviewOutcome{1, 400, ""}},
		{"404", []reviewAnswer{a(404)}, 0, reviewOutcome{1, 404, ""}},
		{"422", []reviewAnswer{a(422)}, 0, reviewOutcome{1, 422, ""}},
		{"425", []reviewAnswer{a(425), a(201)}, 0, reviewOutcome{1, 425, ""}},
		{"408", []reviewAnswer{a(408), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"409", []reviewAnswer{a(409), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"409 replayed", []reviewAnswer{a(409, "Idempotent-Replayed", "true"), a(201)}, 0, reviewOutcome{1, 409, ""}},
		{"500 replayed", []reviewAnswer{a(500, "Idempotent-Replayed", "TRUE"), a(201)}, 0, reviewOutcome{1, 500, ""}},
		{"429", []reviewAnswer{a(429), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"500", []reviewAnswer{a(500), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"501", []reviewAnswer{a(501), a(201)}, 0, reviewOutcome{1, 501, ""}},
		{"502", []reviewAnswer{a(502), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"503 x3", []reviewAnswer{a(503)}, 0, reviewOutcome{3, 503, ""}},
		{"504", []reviewAnswer{a(504), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"599", []reviewAnswer{a(599), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"503 should-retry false", []reviewAnswer{a(503, "Stripe-Should-Retry", "false"), a(201)}, 0, reviewOutcome{1, 503, ""}},
		{"400 should-retry true", []reviewAnswer{a(400, "Stripe-Should-Retry", "true"), a(201)}, 0, reviewOutcome{1, 400, ""}},
		{"422 should-retry true", []reviewAnswer{a(422, "Stripe-Should-Retry", "true"), a(201)}, 0, reviewOutcome{1, 422, ""}},
		{"404 should-retry true", []reviewAnswer{a(404, "Stripe-Should-Retry", "true"), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"429 retry-after 0", []reviewAnswer{a(429, "Retry-After", "0"), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"429 retry-after 1 capped", []reviewAnswer{a(429, "Retry-After", "1"), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"429 retry-after huge", []reviewAnswer{a(429, "Retry-After", "99999999999999999999999999"), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"429 retry-after negative", []reviewAnswer{a(429, "Retry-After", "-5"), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"429 retry-after malformed", []reviewAnswer{a(429, "Retry-After", "soon"), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"503 retry-after past date", []reviewAnswer{a(503, "Retry-After", date(-time.Hour)), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"503 retry-after future date", []reviewAnswer{a(503, "Retry-After", date(time.Hour)), a(201)}, 0, reviewOutcome{2, 201, ""}},
		{"503 retry-after beyond deadline", []reviewAnswer{a(503, "Retry-After", "1"), a(201)}, 30 * time.Millisecond, reviewOutcome{1, 503, ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			tr, ad := reviewRun(t, tt.script, timeout)
			if tr != tt.want || ad != tt.want {
				t.Errorf("transport: %v; adapter: %v; want %v", tr, ad, tt.want)
			}
		})
	}
}

// The adapter's Backoff honours a Retry-After at or below the cap as the
// Transport does: the wait never ends before the server said.
func TestRetryableRetryAfterBelowTheCapIsNeverShortened(t *testing.T) {
	c := retryablehttp.NewClient()
	a := newAdapter(c, newConfig([]Option{WithMaxRetryAfter(30 * time.Second)}))
	for _, asked := range []int{29, 30} {
		resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {fmt.Sprint(asked)}}}
		for range 40 {
			if w := a.backoff(time.Millisecond, time.Millisecond, 0, resp); w < time.Duration(asked)*time.Second || w > 30*time.Second {
				t.Fatalf("Retry-After %d, cap 30s: wait %v; want one in [%ds, 30s]", asked, w, asked)
			}
		}
	}
}

// A retry cut short by the request's context during Backoff's wait is not
// made, and its cost goes back to the budget, as with the Transport (see
// saferetry's TestCancelledWaitRefundsBudget): otherwise three cancelled
// requests here empty a budget of 30 and turn retries off for every other
// request of the client.
func TestRetryableCancelledWaitRefundsBudget(t *testing.T) {
	s := &reviewServer{script: []reviewAnswer{{status: 503}}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = time.Hour, time.Hour
	Configure(c, WithMaxAttempts(3), WithRetryBudget(30, 10))
	defer c.HTTPClient.CloseIdleConnections()
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			// Cancel once the request waits for its retry.
			for {
				if keys, _ := s.seen(); len(keys) > i {
					time.Sleep(20 * time.Millisecond)
					cancel()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		req, _ := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, srv.URL, []byte("payload"))
		if _, err := c.Do(req); !errors.Is(err, context.Canceled) {
			t.Fatalf("request %d: %v, want context.Canceled", i+1, err)
		}
		cancel()
	}
	// A healthy request now: one 503, then the answer.
	s.mu.Lock()
	s.keys, s.bodies, s.script = nil, nil, []reviewAnswer{{status: 503}, {status: 201}}
	s.mu.Unlock()
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, time.Millisecond
	req, _ := retryablehttp.NewRequest(http.MethodPost, srv.URL, []byte("payload"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if keys, _ := s.seen(); resp.StatusCode != 201 || len(keys) != 2 {
		t.Fatalf("status %d after %d attempts; want 201 after 2 (the budget refunded for the retries never made)", resp.StatusCode, len(keys))
	}
}
