package saferetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jarcoal/httpmock"

	"github.com/saferetry/saferetry/internal/clock"
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

// AfterFunc is not used by the Transport; fakeClock has it to be a
// clock.Clock.
func (c *fakeClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("fakeClock: AfterFunc is not used by the Transport")
}

type fakeTimer struct{ ch chan time.Time }

func (t fakeTimer) C() <-chan time.Time      { return t.ch }
func (t fakeTimer) Stop() bool               { return true }
func (t fakeTimer) Reset(time.Duration) bool { return true }

// constBackoff is a fixed schedule, so tests can predict waits.
func constBackoff(d time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff { return backoff.NewConstantBackOff(d) }
}

// outcome is one scripted answer of a recorder.
type outcome struct {
	status int
	header http.Header
	body   string
	err    error
}

func status(code int) outcome { return outcome{status: code} }

func statusH(code int, kv ...string) outcome {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return outcome{status: code, header: h}
}

func fail(err error) outcome { return outcome{err: err} }

// seen is what the server side saw of one attempt.
type seen struct {
	method string
	keys   []string
	body   string
	header http.Header
}

// recorder is an httpmock responder that answers from a script (the last
// outcome repeats) and records every attempt. Response bodies report
// whether they were closed.
type recorder struct {
	mu     sync.Mutex
	script []outcome
	reqs   []seen
	bodies []*trackedBody
}

func newRecorder(script ...outcome) *recorder { return &recorder{script: script} }

func (rc *recorder) respond(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	rc.mu.Lock()
	n := len(rc.reqs)
	rc.reqs = append(rc.reqs, seen{
		method: req.Method,
		keys:   req.Header.Values(HeaderIdempotencyKey),
		body:   string(body),
		header: req.Header.Clone(),
	})
	o := rc.script[min(n, len(rc.script)-1)]
	rc.mu.Unlock()
	if o.err != nil {
		return nil, o.err
	}
	tb := &trackedBody{Reader: strings.NewReader(o.body)}
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, tb)
	rc.mu.Unlock()
	h := http.Header{}
	for k, v := range o.header {
		h[k] = v
	}
	return &http.Response{StatusCode: o.status, Status: http.StatusText(o.status), Header: h,
		Body: tb, Request: req, ContentLength: int64(len(o.body))}, nil
}

func (rc *recorder) Seen() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

func (rc *recorder) Bodies() []*trackedBody {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*trackedBody(nil), rc.bodies...)
}

// mockBase returns an httpmock transport answering any method on
// http://api.test/ from rc.
func mockBase(rc *recorder) *httpmock.MockTransport {
	m := httpmock.NewMockTransport()
	m.RegisterNoResponder(rc.respond)
	return m
}

type trackedBody struct {
	io.Reader
	mu     sync.Mutex
	closed bool
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *trackedBody) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
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
func testTransport(rc *recorder, opts ...Option) (*Transport, *fakeClock, *hookLog) {
	clk := newFakeClock()
	hl := &hookLog{}
	all := append([]Option{withClock(clk), WithBackoff(constBackoff(10 * time.Millisecond)), WithHook(hl.hook)}, opts...)
	return NewTransport(mockBase(rc), all...), clk, hl
}

// errReset stands for a connection reset after the request was written.
var errReset = errors.New("connection reset by peer")

// closeResp closes a response body if there is one.
func closeResp(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}

// advance moves the fake time forward by d, as a slow server would.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
