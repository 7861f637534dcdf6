package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

func newStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s := memstore.New(opts...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// blockFirst returns a counter whose first execution closes started and
// then waits for release to be closed; later executions run at once.
func blockFirst() (app *counter, started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	app = &counter{}
	app.before = func(http.ResponseWriter, *http.Request) int {
		if app.calls.Load() == 1 {
			close(started)
			<-release
		}
		return 0
	}
	return app, started, release
}

// blockEach returns a counter each of whose executions closes started
// (so a second execution panics) and waits for release to be closed.
func blockEach() (app *counter, started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	app = &counter{before: func(http.ResponseWriter, *http.Request) int {
		close(started)
		<-release
		return 0
	}}
	return app, started, release
}

// counter is an application handler that counts its executions and answers
// 201 with a body naming the execution and echoing the request body.
type counter struct {
	calls atomic.Int64
	// before, if set, runs at the start of each execution (to block, or to
	// pick a status).
	before func(w http.ResponseWriter, r *http.Request) (status int)
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.calls.Add(1)
	status := http.StatusCreated
	if c.before != nil {
		if s := c.before(w, r); s != 0 {
			status = s
		}
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/ops/%d", n))
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"execution":%d,"request":%q}`, n, body)
}

type reqOpt func(*http.Request)

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

// atTarget sends the request to target (a path and query, as a client
// sends them) instead of send's own.
func atTarget(target string) reqOpt {
	return func(r *http.Request) {
		r.URL = httptest.NewRequest(r.Method, target, nil).URL
		r.RequestURI = target
	}
}

// send runs one request through h and returns the recorded response.
func send(h http.Handler, method, key, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/ops?b=2&a=1", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set(idempotency.HeaderIdempotencyKey, key)
	}
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func post(h http.Handler, key, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	return send(h, http.MethodPost, key, body, opts...)
}

// postPanicking posts {} under the key "k" to h, which is to panic, and
// returns the panic that went on (nil if none did).
func postPanicking(h http.Handler) (p any) {
	defer func() { p = recover() }()
	post(h, "k", `{}`)
	return nil
}

type problemDoc struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail"`
	OriginalStatus int    `json:"original_status"`
}

// wantProblem checks that w is a problem of the given type and status.
func wantProblem(t *testing.T, w *httptest.ResponseRecorder, status int, typ string) problemDoc {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != idempotency.ContentTypeProblem {
		t.Fatalf("Content-Type = %q, want %q", ct, idempotency.ContentTypeProblem)
	}
	var p problemDoc
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" {
		t.Fatalf("problem = %+v, want type %s status %d with a title", p, typ, status)
	}
	return p
}

func wantReplay(t *testing.T, w, first *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code != first.Code || w.Body.String() != first.Body.String() {
		t.Fatalf("replay = %d %s, want %d %s", w.Code, w.Body, first.Code, first.Body)
	}
	if got := w.Header().Get(idempotency.HeaderReplayed); got != "true" {
		t.Fatalf("%s = %q, want true", idempotency.HeaderReplayed, got)
	}
}

// events collects hook events.
type events struct {
	mu  sync.Mutex
	got []idempotency.Event
}

func (e *events) hook(ev idempotency.Event) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
}

func (e *events) outcomes() []idempotency.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]idempotency.Outcome, len(e.got))
	for i, ev := range e.got {
		out[i] = ev.Outcome
	}
	return out
}

func (e *events) find(o idempotency.Outcome) (idempotency.Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.got {
		if ev.Outcome == o {
			return ev, true
		}
	}
	return idempotency.Event{}, false
}

// faultyStore wraps a Store and lets a test replace single methods.
type faultyStore struct {
	idempotency.Store
	claim    func(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error)
	renew    func(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error
	complete func(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error
	release  func(ctx context.Context, k idempotency.Key, token int64) error
}

func (f *faultyStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if f.claim != nil {
		return f.claim(ctx, k, fp, lease, ttl)
	}
	return f.Store.Claim(ctx, k, fp, lease, ttl)
}

func (f *faultyStore) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if f.renew != nil {
		return f.renew(ctx, k, token, lease)
	}
	return f.Store.Renew(ctx, k, token, lease)
}

func (f *faultyStore) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if f.complete != nil {
		return f.complete(ctx, k, token, resp, ttl)
	}
	return f.Store.Complete(ctx, k, token, resp, ttl)
}

func (f *faultyStore) Release(ctx context.Context, k idempotency.Key, token int64) error {
	if f.release != nil {
		return f.release(ctx, k, token)
	}
	return f.Store.Release(ctx, k, token)
}

// workingFor returns a handler that answers 201 after d, unless its
// request context ends first: then it answers 503 and *cause holds the
// context's cause.
func workingFor(d time.Duration, cause *error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			*cause = context.Cause(r.Context())
			w.WriteHeader(http.StatusServiceUnavailable)
		case <-time.After(d):
			w.WriteHeader(http.StatusCreated)
		}
	})
}

// overWire serves h on a real server (net/http's own writer, which
// sniffs, chunks and sends trailers) for the test's duration, and returns
// a function that POSTs {} to it with key and returns the answer with its
// whole body read (so its trailers are in) and closed.
func overWire(t *testing.T, h http.Handler) func(key string) (*http.Response, string) {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return func(key string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ops", strings.NewReader(`{}`))
		req.Header.Set(idempotency.HeaderIdempotencyKey, key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
}
