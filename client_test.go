package saferetry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

func testClient(rc *testkit.Recorder, opts ...Option) *Client {
	all := append([]Option{WithBase(mockBase(rc)), withClock(newFakeClock()), WithBackoff(constBackoff(time.Millisecond))}, opts...)
	return NewClient(all...)
}

func TestClientSuccess(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Outcome{Status: 201, Body: "ok"})
	c := testClient(rc)
	resp, err := c.Do(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || string(b) != "ok" {
		t.Fatalf("status %d body %q", resp.StatusCode, b)
	}
	if k, ok := KeyFromResponse(resp); !ok || k != rc.Seen()[0].Keys[0] {
		t.Errorf("KeyFromResponse = %q", k)
	}
}

func TestClientAPIErrors(t *testing.T) {
	problem := `{"type":"https://saferetry.dev/problems/key-reused","title":"Key reused","status":422,"detail":"different payload"}`
	tests := []struct {
		name       string
		script     []testkit.Outcome
		inProgress bool
		reused     bool
		attempts   int
		problem    bool
	}{
		{"422 problem", []testkit.Outcome{{Status: 422, Body: problem, Header: http.Header{"Content-Type": {"application/problem+json; charset=utf-8"}}}}, false, true, 1, true},
		{"409 in progress", []testkit.Outcome{testkit.StatusH(409, "Retry-After", "0")}, true, false, 3, false},
		{"409 replayed", []testkit.Outcome{{Status: 409, Body: "conflict", Header: http.Header{HeaderReplayed: {"true"}}}}, false, false, 1, false},
		{"422 replayed", []testkit.Outcome{{Status: 422, Body: "invalid", Header: http.Header{HeaderReplayed: {"true"}}}}, false, false, 1, false},
		{"404", []testkit.Outcome{{Status: 404, Body: "nope"}}, false, false, 1, false},
		{"503 exhausted", []testkit.Outcome{{Status: 503, Body: "down"}}, false, false, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.script...)
			c := testClient(rc, WithMaxAttempts(3))
			resp, err := c.Do(newReq(t, context.Background(), http.MethodPost, "x"))
			if resp != nil {
				t.Fatal("response returned with an APIError")
			}
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err %T %v, want *APIError", err, err)
			}
			if ae.StatusCode != tt.script[0].Status || ae.Attempts != tt.attempts || ae.Key == "" || ae.Key != rc.Seen()[0].Keys[0] {
				t.Errorf("APIError %+v", ae)
			}
			if string(ae.Body) != tt.script[0].Body {
				t.Errorf("body %q", ae.Body)
			}
			if errors.Is(err, ErrInProgress) != tt.inProgress || errors.Is(err, ErrKeyReused) != tt.reused {
				t.Errorf("Is(ErrInProgress)=%v Is(ErrKeyReused)=%v", errors.Is(err, ErrInProgress), errors.Is(err, ErrKeyReused))
			}
			if (ae.Problem != nil) != tt.problem {
				t.Fatalf("problem %+v", ae.Problem)
			}
			if tt.problem && (ae.Problem.Type != "https://saferetry.dev/problems/key-reused" || ae.Problem.Status != 422 ||
				!strings.Contains(err.Error(), "different payload")) {
				t.Errorf("problem %+v, message %q", ae.Problem, err)
			}
			bodies := rc.Bodies()
			if !bodies[len(bodies)-1].Closed() {
				t.Error("error response body not closed")
			}
		})
	}
}

func TestClientErrorBodyBounded(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Outcome{Status: 400, Body: strings.Repeat("e", 100)})
	c := testClient(rc, WithMaxErrorBody(10))
	_, err := c.Do(newReq(t, context.Background(), http.MethodPost, "x"))
	var ae *APIError
	if !errors.As(err, &ae) || len(ae.Body) != 10 {
		t.Fatalf("err %v", err)
	}
}

func TestClientOutcomeUnknown(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Fail(testkit.ErrReset))
	c := testClient(rc, WithMaxAttempts(2))
	req := newReq(t, WithKey(context.Background(), "debit-7"), http.MethodPost, "x")
	_, err := c.Do(req)
	var e *Error
	var ue *url.Error
	if !errors.As(err, &e) || !errors.As(err, &ue) || !errors.Is(err, ErrOutcomeUnknown) || e.Key != "debit-7" || e.Attempts != 2 {
		t.Fatalf("err %v", err)
	}
}

func TestClientWithHTTPClientKeepsTemplate(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(201))
	tmpl := &http.Client{Transport: mockBase(rc), Timeout: time.Minute}
	c := NewClient(WithHTTPClient(tmpl))
	if tmpl.Transport == c.HTTPClient().Transport {
		t.Fatal("template modified")
	}
	if c.HTTPClient().Timeout != time.Minute || c.HTTPClient().Transport != c.Transport() {
		t.Fatal("template not used")
	}
	resp, err := c.Do(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(rc.Seen()) != 1 || len(rc.Seen()[0].Keys) != 1 {
		t.Fatalf("seen %+v", rc.Seen())
	}
}

func TestClientRedirectKeepsKey(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		rc := testkit.NewRecorder(testkit.StatusH(code, "Location", "http://api.test/v2/debits"), testkit.StatusH(503), testkit.Status(201))
		c := testClient(rc)
		req := newReq(t, context.Background(), http.MethodPost, "debit 1500")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := rc.Seen()
		if len(s) != 3 || resp.StatusCode != 201 {
			t.Fatalf("%d: status %d after %d round trips", code, resp.StatusCode, len(s))
		}
		for i, a := range s {
			if len(a.Keys) != 1 || a.Keys[0] != s[0].Keys[0] || a.Method != http.MethodPost || a.Body != "debit 1500" {
				t.Errorf("%d: round trip %d: method %s keys %q body %q, want the first hop's key", code, i+1, a.Method, a.Keys, a.Body)
			}
		}
		if k, _ := KeyFromResponse(resp); k != s[0].Keys[0] {
			t.Errorf("%d: KeyFromResponse %q, want %q", code, k, s[0].Keys[0])
		}
		if _, ok := KeyFromContext(req.Context()); ok || req.Header.Get(HeaderIdempotencyKey) != "" {
			t.Errorf("%d: caller's request modified", code)
		}
	}
}

func TestClientSeeOtherGetHasNoKey(t *testing.T) {
	rc := testkit.NewRecorder(testkit.StatusH(http.StatusSeeOther, "Location", "http://api.test/v1/debits/7"), testkit.Status(200))
	c := testClient(rc)
	resp, err := c.Do(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := rc.Seen()
	if len(s) != 2 || len(s[0].Keys) != 1 || s[1].Method != http.MethodGet || len(s[1].Keys) != 0 {
		t.Fatalf("round trips %+v; want a keyed POST then a GET without the POST's key", s)
	}
}

func TestClientTimeoutKeepsTypedError(t *testing.T) {
	// net/http replaces the Transport's error by its own when
	// http.Client.Timeout expires; Do must still return the key.
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	c := NewClient(WithHTTPClient(&http.Client{Timeout: 30 * time.Millisecond}), WithBase(base))
	_, err := c.Do(newReq(t, WithKey(context.Background(), "debit-8"), http.MethodPost, "x"))
	var e *Error
	var ne interface{ Timeout() bool }
	if !errors.As(err, &e) || !errors.Is(err, ErrOutcomeUnknown) || e.Key != "debit-8" || e.Attempts != 1 {
		t.Fatalf("err = %v; want an *Error with the key", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("err = %v; want it to stay a timeout matching context.DeadlineExceeded", err)
	}
}

// netTimeout stands for net/http's Client.Timeout error, which keeps only
// the text of the error it replaces.
type netTimeout struct{}

func (netTimeout) Error() string   { return "Client.Timeout exceeded" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Is(t error) bool { return t == context.DeadlineExceeded }

func TestKeepOutcomeUnderReplacedError(t *testing.T) {
	op := &Error{Cause: ErrOutcomeUnknown, Key: "k-1", Attempts: 2, Err: context.DeadlineExceeded}
	err := keepOutcome(&url.Error{Op: "Post", URL: "http://api.test/", Err: netTimeout{}}, op)
	var e *Error
	var ue *url.Error
	if !errors.As(err, &e) || e != op || !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the operation's *Error reachable", err)
	}
	if !errors.As(err, &ue) || !ue.Timeout() || err.Error() != `Post "http://api.test/": Client.Timeout exceeded` {
		t.Errorf("err = %q; want net/http's error and its Timeout kept", err)
	}
	if !op.Timeout() || (&Error{Cause: ErrOutcomeUnknown, Err: testkit.ErrReset}).Timeout() {
		t.Error("Error.Timeout does not follow its last error")
	}
	plain := &url.Error{Op: "Post", URL: "http://api.test/", Err: op}
	if got := keepOutcome(plain, op); got != plain || plain.Err != op {
		t.Error("an error already carrying the *Error was changed")
	}
}

func TestZeroErrorsAreUsable(t *testing.T) {
	var e Error
	if e.Error() != "saferetry: request failed" || errors.Is(&e, ErrOutcomeUnknown) || errors.Is(&e, ErrNotSent) || e.Timeout() {
		t.Errorf("zero Error: %q", e.Error())
	}
	var ae APIError
	if ae.Error() != "saferetry: HTTP 0" || errors.Is(&ae, ErrKeyReused) || errors.Is(&ae, ErrInProgress) {
		t.Errorf("zero APIError: %q", ae.Error())
	}
}

func TestNilOptionIgnoredAndLaterOptionWins(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(503), testkit.Status(503))
	tr, _, _ := testTransport(rc, nil, WithMaxAttempts(3), nil, WithMaxAttempts(2))
	resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if err != nil {
		t.Fatal(err)
	}
	closeResp(resp)
	if n := len(rc.Seen()); n != 2 || resp.StatusCode != 503 {
		t.Fatalf("attempts = %d, status %d; want the later WithMaxAttempts(2) to win", n, resp.StatusCode)
	}
}

// Client.Do costs at most one allocation beyond sending the same request
// through its http.Client: the call's context, which holds the request
// carrying it; the key it pins up front costs no allocation, as the
// Transport's own does not.
func TestClientOverheadAllocations(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	c := NewClient(WithBase(base))
	payload := []byte(`{"amount":1500}`)
	newPost := func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", bytes.NewReader(payload))
		return req
	}
	send := func(do func(*http.Request) (*http.Response, error)) func() {
		return func() {
			if r, err := do(newPost()); err != nil || r.StatusCode != http.StatusCreated {
				t.Fatal(r, err)
			}
		}
	}
	plain := testing.AllocsPerRun(200, send(c.HTTPClient().Do))
	client := testing.AllocsPerRun(200, send(c.Do))
	if own := client - plain; own > 1 {
		t.Errorf("Client.Do allocates %.0f times more than its http.Client, want at most 1", own)
	}
}
