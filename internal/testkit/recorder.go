// Package testkit holds test helpers that packages' tests share and that
// need no service: a scripted HTTP responder that records what it was sent
// (for the client-side packages), the loop of their in-memory benchmarks,
// a buffer for output written by other goroutines, and a panic check.
// Only _test.go files import it; it imports nothing of saferetry, so the
// root package's own (internal) tests can use it.
package testkit

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
)

// HeaderIdempotencyKey is the header whose values a Recorder records as
// Seen.Keys: saferetry.HeaderIdempotencyKey, spelled out here because the
// root package's tests import this package.
const HeaderIdempotencyKey = "Idempotency-Key"

// ErrReset stands for a connection reset after the request was written.
var ErrReset = errors.New("connection reset by peer")

// Outcome is one scripted answer of a Recorder: the error Err if set,
// else a response of Status with Header and Body.
type Outcome struct {
	Status int
	Header http.Header
	Body   string
	Err    error
}

// Status is an answer of the status code alone.
func Status(code int) Outcome { return Outcome{Status: code} }

// StatusH is an answer of the status code with headers given as key,
// value pairs.
func StatusH(code int, kv ...string) Outcome {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return Outcome{Status: code, Header: h}
}

// Fail is an answer of the transport error err.
func Fail(err error) Outcome { return Outcome{Err: err} }

// Seen is what the server side saw of one attempt.
type Seen struct {
	Method string
	Keys   []string
	Body   string
	Header http.Header
}

// Recorder answers from a script (the last outcome repeats) and records
// every attempt. Response bodies report whether they were closed. Its
// methods are safe for simultaneous use by multiple goroutines.
type Recorder struct {
	mu     sync.Mutex
	script []Outcome
	reqs   []Seen
	bodies []*TrackedBody
}

// NewRecorder returns a Recorder answering from script, which must not
// be empty.
func NewRecorder(script ...Outcome) *Recorder { return &Recorder{script: script} }

// SetScript replaces the script, which must not be empty; attempts
// already recorded count towards it.
func (rc *Recorder) SetScript(script ...Outcome) {
	rc.mu.Lock()
	rc.script = script
	rc.mu.Unlock()
}

// Restart replaces the script, which must not be empty, and forgets the
// attempts recorded so far, so the script starts again at its first
// outcome.
func (rc *Recorder) Restart(script ...Outcome) {
	rc.mu.Lock()
	rc.script = script
	rc.reqs = nil
	rc.mu.Unlock()
}

// Respond records req and answers it from the script; it has the shape of
// an httpmock responder and of http.RoundTripper's RoundTrip.
func (rc *Recorder) Respond(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	rc.mu.Lock()
	n := len(rc.reqs)
	rc.reqs = append(rc.reqs, Seen{
		Method: req.Method,
		Keys:   req.Header.Values(HeaderIdempotencyKey),
		Body:   string(body),
		Header: req.Header.Clone(),
	})
	o := rc.script[min(n, len(rc.script)-1)]
	rc.mu.Unlock()
	if o.Err != nil {
		return nil, o.Err
	}
	tb := &TrackedBody{Reader: strings.NewReader(o.Body)}
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, tb)
	rc.mu.Unlock()
	h := http.Header{}
	for k, v := range o.Header {
		h[k] = v
	}
	return &http.Response{StatusCode: o.Status, Status: http.StatusText(o.Status), Header: h,
		Body: tb, Request: req, ContentLength: int64(len(o.Body))}, nil
}

// Seen returns the attempts recorded so far, oldest first.
func (rc *Recorder) Seen() []Seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Seen(nil), rc.reqs...)
}

// Bodies returns the bodies of the responses answered so far, oldest
// first.
func (rc *Recorder) Bodies() []*TrackedBody {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*TrackedBody(nil), rc.bodies...)
}

// TrackedBody is a response body that reports whether it was closed. It
// is safe for a Close and a Closed at once; reads are the caller's to
// serialize.
type TrackedBody struct {
	io.Reader
	mu     sync.Mutex
	closed bool
}

// Close marks the body closed.
func (b *TrackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// Closed reports whether Close was called.
func (b *TrackedBody) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}
