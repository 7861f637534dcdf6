package saferetryablehttp

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/saferetry/saferetry"
)

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
	keys   []string
	body   string
	header http.Header
}

// recorder is an httpmock responder that answers from a script (the last
// outcome repeats) and records every attempt.
type recorder struct {
	mu     sync.Mutex
	script []outcome
	reqs   []seen
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
	rc.reqs = append(rc.reqs, seen{keys: req.Header.Values(saferetry.HeaderIdempotencyKey), body: string(body), header: req.Header.Clone()})
	o := rc.script[min(n, len(rc.script)-1)]
	rc.mu.Unlock()
	if o.err != nil {
		return nil, o.err
	}
	h := http.Header{}
	for k, v := range o.header {
		h[k] = v
	}
	return &http.Response{StatusCode: o.status, Status: http.StatusText(o.status), Header: h,
		Body: io.NopCloser(strings.NewReader(o.body)), Request: req}, nil
}

func (rc *recorder) Seen() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

// errReset stands for a connection reset after the request was written.
var errReset = errors.New("connection reset by peer")
