package idempotency_test

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestReplayOfALargeBodyCarriesItsContentLength: net/http's writer adds a
// Content-Length by itself only to a body that fits its few-KiB buffer,
// and sends a larger one chunked. A handler that sets the Content-Length
// of its 5000-byte answer has it on the first answer; the replay, whose
// body is known whole, must carry it too, not go out chunked without one.
func TestReplayOfALargeBodyCarriesItsContentLength(t *testing.T) {
	body := strings.Repeat("p", 5000)
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	}))
	do := overWire(t, h)
	first, fb := do("k-length")
	again, ab := do("k-length")
	if fb != body || ab != body {
		t.Fatalf("bodies of %d and %d bytes; want the handler's %d bytes", len(fb), len(ab), len(body))
	}
	if again.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("second answer is not a replay: %v", again.Header)
	}
	if first.ContentLength != int64(len(body)) || again.ContentLength != first.ContentLength {
		t.Errorf("Content-Length %d on the first answer, %d on the replay (transfer encoding %q); want %d on both",
			first.ContentLength, again.ContentLength, again.TransferEncoding, len(body))
	}
}

// declaredLengthCase is a handler that declares a Content-Length and writes
// a body that may not match it.
type declaredLengthCase struct {
	name   string
	method string // POST when empty
	limit  int64  // WithMaxResponseBody, the default when 0
	status int    // the final status the handler sets, 200 when 0
	// handle writes the answer; w records what each Write returned.
	handle func(w http.ResponseWriter)
}

// lengthAnswer is what a client got: broken is the error that cut it
// short, "" when it arrived whole.
type lengthAnswer struct {
	status   int
	lengths  []string // the Content-Length field's values
	body     string
	broken   string
	replayed string
}

// writesLog wraps a ResponseWriter and notes what each Write returned.
type writesLog struct {
	http.ResponseWriter
	log      []string
	accepted []byte // the bytes of p[:n] of every Write
}

func (l *writesLog) Write(p []byte) (int, error) {
	n, err := l.ResponseWriter.Write(p)
	l.log = append(l.log, fmt.Sprintf("Write(%q) = %d, %v", p, n, err))
	l.accepted = append(l.accepted, p[:n]...)
	return n, err
}

// serveLength serves c's handler behind wrap on a real server and returns
// a function that sends one request with key and returns the answer, what
// the handler's writes returned (nil for a replay) and the bytes they took.
func serveLength(t *testing.T, c declaredLengthCase, wrap func(http.Handler) http.Handler) func(key string) (lengthAnswer, []string, []byte) {
	t.Helper()
	type run struct {
		log      []string
		accepted []byte
	}
	runs := make(chan run, 4)
	h := wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := &writesLog{ResponseWriter: w}
		c.handle(l)
		runs <- run{l.log, l.accepted}
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := &http.Transport{DisableKeepAlives: true} // a broken answer must not touch the next one
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	return func(key string) (lengthAnswer, []string, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/ops", strings.NewReader(`{}`))
		req.Header.Set(idempotency.HeaderIdempotencyKey, key)
		var a lengthAnswer
		resp, err := client.Do(req)
		if err != nil {
			a.broken = err.Error()
		} else {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			a.status, a.lengths, a.body = resp.StatusCode, resp.Header["Content-Length"], string(b)
			a.replayed = resp.Header.Get(idempotency.HeaderReplayed)
			if err != nil {
				a.broken = err.Error()
			}
		}
		select {
		case r := <-runs:
			return a, r.log, r.accepted
		default:
			return a, nil, nil
		}
	}
}

// TestDeclaredContentLength: net/http's writer takes the Content-Length a
// handler declares when its status is set (at WriteHeader or the first
// Write) as a limit: a Write past it returns http.ErrContentLength and
// writes nothing, the writes before it go out, and a body shorter than
// it is sent under it (the client sees the answer cut short). Behind the
// Middleware the handler must see what its writes would return without
// it, the first answer must be what net/http would send without it, and
// each replay must be, when that first answer was whole, a whole answer
// with the same status and body, and otherwise 410 (completed but not
// replayable): a replay of the bytes written under their own length
// passed an answer its client never got whole off as a good one.
func TestDeclaredContentLength(t *testing.T) {
	write := func(w http.ResponseWriter, parts ...string) {
		for _, p := range parts {
			_, _ = io.WriteString(w, p)
		}
	}
	setLength := func(w http.ResponseWriter, v ...string) { w.Header()["Content-Length"] = v }
	cases := []declaredLengthCase{
		{name: "exact", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			setLength(w, "5")
			w.WriteHeader(http.StatusCreated)
			write(w, "ab", "cde")
		}},
		{name: "shorter, one write", handle: func(w http.ResponseWriter) {
			setLength(w, "3")
			write(w, "abcdef")
		}},
		{name: "shorter, writes past it", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			setLength(w, "3")
			w.WriteHeader(http.StatusCreated)
			write(w, "abc", "def", "", "g")
		}},
		{name: "longer", handle: func(w http.ResponseWriter) {
			setLength(w, "10")
			write(w, "abc")
		}},
		{name: "declared, nothing written", handle: func(w http.ResponseWriter) {
			setLength(w, "5")
		}},
		{name: "several values", handle: func(w http.ResponseWriter) {
			setLength(w, "3", "5")
			write(w, "abc", "de")
		}},
		{name: "garbage", handle: func(w http.ResponseWriter) {
			setLength(w, "x1")
			write(w, "abcde")
		}},
		{name: "negative", handle: func(w http.ResponseWriter) {
			setLength(w, "-1")
			write(w, "abcde")
		}},
		{name: "with a sign", handle: func(w http.ResponseWriter) {
			setLength(w, "+3")
			write(w, "abc", "d")
		}},
		{name: "set after writing", handle: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			write(w, "abcde")
			setLength(w, "2")
		}},
		{name: "changed after writing", handle: func(w http.ResponseWriter) {
			setLength(w, "5")
			write(w, "abcde")
			setLength(w, "2")
		}},
		{name: "changed after WriteHeader, shorter", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			setLength(w, "10")
			w.WriteHeader(http.StatusCreated)
			setLength(w, "3")
			write(w, "abc")
		}},
		{name: "removed after WriteHeader, shorter", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			setLength(w, "10")
			w.WriteHeader(http.StatusCreated)
			w.Header().Del("Content-Length")
			write(w, "abc")
		}},
		{name: "set after WriteHeader", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusCreated)
			setLength(w, "2")
			write(w, "abcde")
		}},
		{name: "changed after a 1xx", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			setLength(w, "2")
			w.WriteHeader(http.StatusEarlyHints)
			setLength(w, "5")
			w.WriteHeader(http.StatusCreated)
			write(w, "abcde", "f")
		}},
		// Past the digits read without strconv.ParseInt (18): its
		// overflow is no length, and leading zeros are read alike.
		{name: "huge", handle: func(w http.ResponseWriter) {
			setLength(w, "99999999999999999999")
			write(w, "abcde")
		}},
		{name: "largest, shorter", handle: func(w http.ResponseWriter) {
			setLength(w, "9223372036854775807")
			write(w, "abcde")
		}},
		{name: "18 digits, leading zeros", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			setLength(w, "000000000000000005")
			w.WriteHeader(http.StatusCreated)
			write(w, "abcde")
		}},
		{name: "19 digits, leading zeros", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			setLength(w, "0000000000000000005")
			w.WriteHeader(http.StatusCreated)
			write(w, "abcde")
		}},
		{name: "empty value", handle: func(w http.ResponseWriter) {
			setLength(w, "")
			write(w, "abcde")
		}},
		{name: "no values", handle: func(w http.ResponseWriter) {
			w.Header()["Content-Length"] = nil
			write(w, "abcde")
		}},
		{name: "same value twice", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			setLength(w, "5", "5")
			w.WriteHeader(http.StatusCreated)
			write(w, "abcde")
		}},
		{name: "exact, with kept headers", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			w.Header()["Location"] = []string{"/ops/1"}
			w.Header()["Content-Type"] = []string{"text/plain"}
			setLength(w, "5")
			w.WriteHeader(http.StatusCreated)
			write(w, "abcde")
		}},
		{name: "non-canonical name, exact", status: http.StatusCreated, handle: func(w http.ResponseWriter) {
			w.Header()["content-length"] = []string{"5"}
			w.WriteHeader(http.StatusCreated)
			write(w, "abcde")
		}},
		{name: "with Transfer-Encoding", handle: func(w http.ResponseWriter) {
			setLength(w, "3")
			w.Header().Set("Transfer-Encoding", "chunked")
			write(w, "abcde")
		}},
		{name: "204", status: http.StatusNoContent, handle: func(w http.ResponseWriter) {
			setLength(w, "5")
			w.WriteHeader(http.StatusNoContent)
			write(w, "abcde")
		}},
		{name: "HEAD, exact", method: http.MethodHead, handle: func(w http.ResponseWriter) {
			setLength(w, "5")
			write(w, "abcde")
		}},
		{name: "HEAD, shorter", method: http.MethodHead, handle: func(w http.ResponseWriter) {
			setLength(w, "3")
			write(w, "abc", "de")
		}},
		{name: "HEAD, longer", method: http.MethodHead, handle: func(w http.ResponseWriter) {
			setLength(w, "10")
			write(w, "abc")
		}},
		{name: "HEAD, declared, nothing written", method: http.MethodHead, handle: func(w http.ResponseWriter) {
			setLength(w, "100")
		}},
		{name: "HEAD, nothing declared", method: http.MethodHead, handle: func(w http.ResponseWriter) {
			write(w, "abc")
		}},
		{name: "over the limit, exact", limit: 4, handle: func(w http.ResponseWriter) {
			setLength(w, "6")
			write(w, "abc", "def")
		}},
		{name: "over the limit, shorter", limit: 4, handle: func(w http.ResponseWriter) {
			setLength(w, "6")
			write(w, "abc", "def", "g")
		}},
		{name: "under the limit, shorter", limit: 4, handle: func(w http.ResponseWriter) {
			setLength(w, "3")
			write(w, "ab", "cdef")
		}},
		{name: "over the limit, set after writing", limit: 4, handle: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			write(w, "ab")
			setLength(w, "2")
			write(w, "cdef")
		}},
	}
	stores := []struct {
		mode  string
		store func(t *testing.T) idempotency.Store
	}{
		{"lease", func(t *testing.T) idempotency.Store { return newStore(t) }},
		// Transactional mode buffers an oversize answer whole.
		{"transactional", func(t *testing.T) idempotency.Store { return &fakeTxStore{Store: newStore(t)} }},
	}
	for _, s := range stores {
		for _, c := range cases {
			t.Run(s.mode+"/"+c.name, func(t *testing.T) { testDeclaredLength(t, c, s.store(t)) })
		}
	}
}

// testDeclaredLength runs c's handler without the Middleware and behind it
// over store, and compares (see TestDeclaredContentLength).
func testDeclaredLength(t *testing.T, c declaredLengthCase, store idempotency.Store) {
	plainAnswer, plainWrites, accepted := serveLength(t, c, func(h http.Handler) http.Handler { return h })("k")
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	mw := idempotency.Middleware(store, idempotency.WithMethods(method), idempotency.WithMaxResponseBody(c.limit))
	do := serveLength(t, c, mw)
	first, writes, _ := do("k-declared")
	again, _, _ := do("k-declared")

	if !slices.Equal(writes, plainWrites) {
		t.Errorf("behind the Middleware the handler's writes returned\n\t%q\nwithout it\n\t%q", writes, plainWrites)
	}
	if first.status != plainAnswer.status || first.body != plainAnswer.body ||
		!slices.Equal(first.lengths, plainAnswer.lengths) || (first.broken == "") != (plainAnswer.broken == "") {
		t.Errorf("first answer %+v; without the Middleware %+v", first, plainAnswer)
	}

	status := cmp.Or(c.status, http.StatusOK)
	if again.replayed != "true" {
		t.Fatalf("second answer is no replay: %+v", again)
	}
	if c.limit > 0 && int64(len(accepted)) > c.limit {
		if again.status != http.StatusGone {
			t.Errorf("replay of an oversize answer: %+v, want 410", again)
		}
		return
	}
	if plainAnswer.broken != "" {
		// The first client never got the answer whole: no replay may pass
		// it off as a good one.
		if again.status != http.StatusGone {
			t.Errorf("replay of an answer cut short (%s without the Middleware): %+v, want 410", plainAnswer.broken, again)
		}
		return
	}
	body := string(accepted)
	if method == http.MethodHead {
		body = "" // the length says what a GET would get
	}
	if again.broken != "" || again.status != status || again.body != body {
		t.Errorf("replay %+v; want a whole %d answer with the %q the handler's writes took without the Middleware", again, status, accepted)
	}
	if method == http.MethodHead {
		// The length is what a GET would get, as the handler said.
		if !slices.Equal(again.lengths, plainAnswer.lengths) {
			t.Errorf("replay's Content-Length %q; the first answer's without the Middleware %q", again.lengths, plainAnswer.lengths)
		}
	} else if len(accepted) > 0 && !slices.Equal(again.lengths, []string{strconv.Itoa(len(accepted))}) {
		t.Errorf("replay's Content-Length %q, want %d", again.lengths, len(accepted))
	}
	if plainAnswer.broken == "" && (again.status != plainAnswer.status || again.body != plainAnswer.body) {
		t.Errorf("replay %d %q; the whole first answer without the Middleware was %d %q",
			again.status, again.body, plainAnswer.status, plainAnswer.body)
	}
}
