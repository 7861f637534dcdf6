package saferetry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jarcoal/httpmock"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testkit"
)

// fakeClock runs waits on fake time: a timer fires at once and moves the
// clock forward, unless hold is set, in which case it never fires.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
	hold  bool
	armed chan time.Duration // receives each requested wait when not nil
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	if c.armed != nil {
		c.armed <- d
	}
	ch := make(chan time.Time, 1)
	if !c.hold {
		c.now = c.now.Add(d)
		ch <- c.now
	}
	return fakeTimer{ch}
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// AfterFunc makes a timer that never fires: the Transport's one limits
// the drain of a retried answer (see drainAnswer), which the bodies of
// the tests' mock bases never stall.
func (c *fakeClock) AfterFunc(time.Duration, func()) clock.Timer {
	return fakeTimer{}
}

type fakeTimer struct{ ch chan time.Time }

func (t fakeTimer) C() <-chan time.Time      { return t.ch }
func (t fakeTimer) Stop() bool               { return true }
func (t fakeTimer) Reset(time.Duration) bool { return true }

// constBackoff is a fixed schedule, so tests can predict waits.
func constBackoff(d time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff { return backoff.NewConstantBackOff(d) }
}

// mockBase returns an httpmock transport answering any method on
// http://api.test/ from rc.
func mockBase(rc *testkit.Recorder) *httpmock.MockTransport {
	m := httpmock.NewMockTransport()
	m.RegisterNoResponder(rc.Respond)
	return m
}

// hookLog collects the attempts a Transport reports.
type hookLog struct {
	mu sync.Mutex
	as []Attempt
}

func (h *hookLog) hook(a Attempt) {
	h.mu.Lock()
	h.as = append(h.as, a)
	h.mu.Unlock()
}

func (h *hookLog) Attempts() []Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Attempt(nil), h.as...)
}

// newReq builds a request with a replayable body (GetBody set).
func newReq(t testing.TB, ctx context.Context, method, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://api.test/v1/debits", r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// testTransport is a Transport over rc on fake time with a constant 10ms
// schedule, the given extra options applied last.
func testTransport(rc *testkit.Recorder, opts ...Option) (*Transport, *fakeClock, *hookLog) {
	clk := newFakeClock()
	hl := &hookLog{}
	all := append([]Option{withClock(clk), WithBackoff(constBackoff(10 * time.Millisecond)), WithHook(hl.hook)}, opts...)
	return NewTransport(mockBase(rc), all...), clk, hl
}

// closeResp closes a response body if there is one.
func closeResp(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}

// mustRoundTrip sends req through tr, fails t unless a response came
// back without an error, and closes its body; the status and headers stay
// readable.
func mustRoundTrip(t testing.TB, tr *Transport, req *http.Request) *http.Response {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	closeResp(resp)
	return resp
}

// advance moves the fake time forward by d, as a slow server would.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
