package saferetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/retrypolicy"
	"github.com/saferetry/saferetry/internal/testkit"
)

func TestRetryClassificationByStatus(t *testing.T) {
	type classCase struct {
		name     string
		first    testkit.Outcome
		attempts int // attempts made for a POST when later attempts answer 201
		reason   Reason
	}
	tests := []classCase{
		{"409 replayed final", testkit.StatusH(409, HeaderReplayed, "true"), 1, ReasonReplayed},
		{"500 replayed final", testkit.StatusH(500, HeaderReplayed, "true"), 1, ReasonReplayed},
		{"503 replayed final", testkit.StatusH(503, HeaderReplayed, "true", "Retry-After", "1"), 1, ReasonReplayed},
		{"500 server says no", testkit.StatusH(500, "Stripe-Should-Retry", "false"), 1, ReasonServerSaid},
		{"404 server says yes", testkit.StatusH(404, "Stripe-Should-Retry", "true"), 2, ReasonServerSaid},
		{"400 final whatever the server says", testkit.StatusH(400, "Stripe-Should-Retry", "true"), 1, ReasonFinalStatus},
		{"422 final whatever the server says", testkit.StatusH(422, "Stripe-Should-Retry", "true"), 1, ReasonFinalStatus},
		{"409 server says yes", testkit.StatusH(409, "stripe-should-retry", "TRUE"), 2, ReasonServerSaid},
		{"500 server says nonsense", testkit.StatusH(500, "Stripe-Should-Retry", "maybe"), 2, ReasonRetryableStatus},
		{"reset retried", testkit.Fail(testkit.ErrReset), 2, ReasonTransportError},
		{"EOF retried", testkit.Fail(errors.New("EOF")), 2, ReasonTransportError},
	}
	for _, code := range []int{200, 201, 400, 401, 404, 422, 501} {
		tests = append(tests, classCase{fmt.Sprintf("%d final", code), testkit.Status(code), 1, ReasonFinalStatus})
	}
	for _, code := range []int{408, 409, 429, 500, 502, 503, 504, 599} {
		tests = append(tests, classCase{fmt.Sprintf("%d retried", code), testkit.Status(code), 2, ReasonRetryableStatus})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.first, testkit.Status(201))
			tr, _, hl := testTransport(rc)
			resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, `{"amount":1500}`))
			if got := len(rc.Seen()); got != tt.attempts {
				t.Fatalf("attempts = %d, want %d", got, tt.attempts)
			}
			if tt.attempts == 1 && resp.StatusCode != tt.first.Status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.first.Status)
			}
			if got := hl.Attempts()[0].Reason; got != tt.reason {
				t.Errorf("first attempt reason = %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestPermanentErrorsAreFinal(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"unknown authority", &url_Error{x509.UnknownAuthorityError{}}},
		{"hostname", x509.HostnameError{Host: "api.test"}},
		{"verification", &tls.CertificateVerificationError{Err: errors.New("bad")}},
		{"not tls", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Fail(tt.err), testkit.Status(201))
			tr, _, hl := testTransport(rc)
			resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
			if resp != nil {
				t.Fatal("response returned with an error")
			}
			if !errors.Is(err, ErrNotSent) || !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want ErrNotSent wrapping %v", err, tt.err)
			}
			if n := len(rc.Seen()); n != 1 {
				t.Fatalf("attempts = %d, want 1", n)
			}
			if r := hl.Attempts()[0].Reason; r != ReasonPermanentError {
				t.Errorf("reason = %q", r)
			}
		})
	}
}

// url_Error wraps an error the way a layered RoundTripper might.
type url_Error struct{ err error }

func (e *url_Error) Error() string { return "wrapped: " + e.err.Error() }
func (e *url_Error) Unwrap() error { return e.err }

func TestDialErrorsAreNotSent(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	rc := testkit.NewRecorder(testkit.Fail(dialErr))
	tr, _, _ := testTransport(rc, WithMaxAttempts(3))
	_, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	var e *Error
	if !errors.As(err, &e) || e.Cause != ErrNotSent || e.Attempts != 3 || e.Key == "" {
		t.Fatalf("err = %#v, want *Error{ErrNotSent, 3 attempts, key}", err)
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		t.Error("a request that never connected must not be testkit.Outcome-unknown")
	}
}

func TestUnsafeMethodWithoutKeyIsNeverRetried(t *testing.T) {
	for _, m := range []string{http.MethodPost, http.MethodPatch, "PURGE"} {
		t.Run(m, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
			tr, _, hl := testTransport(rc, WithKeyMethods())
			resp := mustRoundTrip(t, tr, newReq(t, context.Background(), m, "x"))
			if resp.StatusCode != 503 || len(rc.Seen()) != 1 {
				t.Fatalf("status %d after %d attempts, want 503 after 1", resp.StatusCode, len(rc.Seen()))
			}
			if s := rc.Seen()[0]; len(s.Keys) != 0 {
				t.Errorf("key sent although generation is off: %q", s.Keys)
			}
			if r := hl.Attempts()[0].Reason; r != ReasonNoKey {
				t.Errorf("reason = %q, want %q", r, ReasonNoKey)
			}
		})
	}
	t.Run("transport error", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset), testkit.Status(201))
		tr, _, _ := testTransport(rc, WithKeyMethods())
		_, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
		if !errors.Is(err, ErrOutcomeUnknown) || len(rc.Seen()) != 1 {
			t.Fatalf("err %v after %d attempts, want testkit.Outcome unknown after 1", err, len(rc.Seen()))
		}
	})
}

func TestSafeAndIdempotentMethodsRetriedWithoutKey(t *testing.T) {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete} {
		t.Run(m, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(503), testkit.Fail(testkit.ErrReset), testkit.Status(200))
			tr, _, _ := testTransport(rc)
			resp := mustRoundTrip(t, tr, newReq(t, context.Background(), m, ""))
			if resp.StatusCode != 200 || len(rc.Seen()) != 3 {
				t.Fatalf("status %d after %d attempts, want 200 after 3", resp.StatusCode, len(rc.Seen()))
			}
			for i, s := range rc.Seen() {
				if len(s.Keys) != 0 {
					t.Errorf("attempt %d of %s carried a key %q", i+1, m, s.Keys)
				}
			}
		})
	}
}

func TestClassifierOverrides(t *testing.T) {
	t.Run("retry a 400", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Status(400), testkit.Status(201))
		tr, _, hl := testTransport(rc, WithClassifier(func(_ *http.Request, resp *http.Response, _ error) Decision {
			if resp != nil && resp.StatusCode == 400 {
				return DecisionRetry
			}
			return DecisionDefault
		}))
		resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
		if resp.StatusCode != 201 || len(rc.Seen()) != 2 {
			t.Fatalf("status %d after %d attempts", resp.StatusCode, len(rc.Seen()))
		}
		if a := hl.Attempts()[0]; a.Reason != ReasonClassifier || a.Decision != DecisionRetry {
			t.Errorf("attempt 1 = %+v", a)
		}
	})
	t.Run("stop on 503", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
		tr, _, _ := testTransport(rc, WithClassifier(func(*http.Request, *http.Response, error) Decision { return DecisionReturn }))
		resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
		if resp.StatusCode != 503 || len(rc.Seen()) != 1 {
			t.Fatalf("status %d after %d attempts", resp.StatusCode, len(rc.Seen()))
		}
	})
	t.Run("cannot retry a keyless POST", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Status(400), testkit.Status(201))
		tr, _, _ := testTransport(rc, WithKeyMethods(), WithClassifier(func(*http.Request, *http.Response, error) Decision { return DecisionRetry }))
		mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
		if len(rc.Seen()) != 1 {
			t.Fatalf("attempts = %d, want 1", len(rc.Seen()))
		}
	})
}

func TestMaxAttempts(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		rc := testkit.NewRecorder(testkit.Status(503))
		tr, clk, hl := testTransport(rc, WithMaxAttempts(n))
		resp := mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
		if resp.StatusCode != 503 || len(rc.Seen()) != n {
			t.Errorf("n=%d: status %d after %d attempts", n, resp.StatusCode, len(rc.Seen()))
		}
		if len(clk.Waits()) != n-1 {
			t.Errorf("n=%d: %d waits", n, len(clk.Waits()))
		}
		last := hl.Attempts()[n-1]
		if n > 1 && last.Reason != ReasonMaxAttempts {
			t.Errorf("n=%d: last reason %q", n, last.Reason)
		}
	}
}

// TestPolicyValuesMapOntoTheAPI checks that every reason of the retry
// policy is named by the Reason constant of the same name, and that a
// Decision converts to the policy's classifier answer of the same meaning.
func TestPolicyValuesMapOntoTheAPI(t *testing.T) {
	want := map[retrypolicy.Reason]Reason{
		retrypolicy.ReasonFinalStatus:       ReasonFinalStatus,
		retrypolicy.ReasonReplayed:          ReasonReplayed,
		retrypolicy.ReasonRetryableStatus:   ReasonRetryableStatus,
		retrypolicy.ReasonRetryAfter:        ReasonRetryAfter,
		retrypolicy.ReasonTransportError:    ReasonTransportError,
		retrypolicy.ReasonAttemptTimeout:    ReasonAttemptTimeout,
		retrypolicy.ReasonPermanentError:    ReasonPermanentError,
		retrypolicy.ReasonNoKey:             ReasonNoKey,
		retrypolicy.ReasonBodyNotReplayable: ReasonBodyNotReplayable,
		retrypolicy.ReasonMaxAttempts:       ReasonMaxAttempts,
		retrypolicy.ReasonBudgetExhausted:   ReasonBudgetExhausted,
		retrypolicy.ReasonDeadline:          ReasonDeadline,
		retrypolicy.ReasonContextDone:       ReasonContextDone,
		retrypolicy.ReasonBackoffStop:       ReasonBackoffStop,
		retrypolicy.ReasonClassifier:        ReasonClassifier,
		retrypolicy.ReasonServerSaid:        ReasonServerSaid,
	}
	for r := retrypolicy.Reason(0); r <= retrypolicy.NumReasons; r++ {
		if got := reasonOf(r); got != want[r] {
			t.Errorf("policy reason %d maps to %q, want %q", r, got, want[r])
		}
	}
	if len(want) != int(retrypolicy.NumReasons)-1 {
		t.Errorf("the test names %d policy reasons, the policy has %d", len(want), retrypolicy.NumReasons-1)
	}
	for d, o := range map[Decision]retrypolicy.Override{DecisionDefault: retrypolicy.Default, DecisionRetry: retrypolicy.Retry, DecisionReturn: retrypolicy.Return} {
		if retrypolicy.Override(d) != o {
			t.Errorf("%v converts to %d, want %d", d, retrypolicy.Override(d), o)
		}
	}
}

func TestHooksCompose(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
	var order []string
	first := func(a Attempt) { order = append(order, "first "+a.Decision.String()) }
	second := func(a Attempt) { order = append(order, "second "+a.Decision.String()) }
	tr, _, hl := testTransport(rc, WithHook(first), WithHook(nil), WithHook(second))
	mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
	want := []string{"first retry", "second retry", "first return", "second return"}
	if len(order) != len(want) || len(hl.Attempts()) != 2 {
		t.Fatalf("hooks saw %q (and the first hook %d attempts); want %q", order, len(hl.Attempts()), want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("hooks saw %q; want %q", order, want)
		}
	}
}

// TestCancelledWaitRefundsBudget: a retry that the operation's context
// ends during its wait is never sent, so its cost goes back to the retry
// budget, as a vetoed retry's does; before, every such cancellation kept 5
// to 10 tokens that nothing refilled. Found by a review helper.
func TestCancelledWaitRefundsBudget(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503))
	clk := newFakeClock()
	clk.hold = true
	clk.armed = make(chan time.Duration, 1)
	tr := NewTransport(mockBase(rc), withClock(clk), WithBackoff(constBackoff(time.Hour)), WithRetryBudget(100, 5))
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-clk.armed; cancel() }()
		if _, err := tr.RoundTrip(newReq(t, ctx, http.MethodPost, "x")); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	if got := len(rc.Seen()); got != 3 {
		t.Fatalf("%d attempts, want 3 (no retry made)", got)
	}
	if got := tr.policy.Budget.Available(); got != 100 {
		t.Errorf("tokens = %d after 3 operations whose retries were never made, want 100", got)
	}
}

// TestRefusedBeforeSendingIsFinal: a request that net/http refuses before
// sending anything (an invalid header value, a scheme it does not support)
// was retried to the attempt limit and reported as ErrOutcomeUnknown, and
// each such call took 30 tokens from the shared retry budget, never given
// back: fifteen of them turned retries off for every other caller. It is
// now one attempt, ErrNotSent, and the budget is untouched, so that a
// healthy operation's 503 is still retried. Found by a review helper.
func TestRefusedBeforeSendingIsFinal(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	hl := &hookLog{}
	tr := NewTransport(nil, WithBackoff(constBackoff(time.Millisecond)), WithHook(hl.hook))
	for _, tc := range []struct{ name, url, header string }{
		{"invalid header value", srv.URL, "a\r\nb"},
		{"unsupported scheme", "ftp://files.example/x", "ok"},
	} {
		before := len(hl.Attempts())
		req, _ := http.NewRequest(http.MethodPost, tc.url, nil)
		req.Header.Set("X-Note", tc.header)
		_, err := tr.RoundTrip(req)
		if got := len(hl.Attempts()) - before; !errors.Is(err, ErrNotSent) || got != 1 {
			t.Errorf("%s: %d attempts, err = %v; want 1 attempt and ErrNotSent", tc.name, got, err)
		}
	}
	for range 15 { // a caller's bug repeated: one bad header value per request
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("X-Note", "a\nb")
		_, _ = tr.RoundTrip(req)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil) // a healthy operation: 503, then 201
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a healthy operation ended with %d: the budget was drained by retries of requests never sent", resp.StatusCode)
	}
}
