package interop_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/idempotency"
)

// recordingPayments is payments that also keeps the body of each answer it
// wrote, to compare with what the client got.
type recordingPayments struct {
	payments
	mu      sync.Mutex
	written [][]byte
}

func (p *recordingPayments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	p.payments.ServeHTTP(rec, r)
	p.mu.Lock()
	p.written = append(p.written, rec.Body.Bytes())
	p.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (p *recordingPayments) Written() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.written...)
}

// http2Setup is a protected handler behind a front on an HTTPS server that
// speaks HTTP/2, and a saferetry client that speaks only HTTP/2 to it and
// keeps every Attempt its hook saw.
type http2Setup struct {
	srv      *httptest.Server
	front    *front
	payments *recordingPayments
	client   *saferetry.Client

	mu       sync.Mutex
	attempts []saferetry.Attempt
}

func newHTTP2Setup(t *testing.T) *http2Setup {
	t.Helper()
	s := &http2Setup{payments: &recordingPayments{}}
	s.front = newFront(idempotency.Middleware(newStore(t))(s.payments))
	s.srv = httptest.NewUnstartedServer(s.front)
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)

	base := s.srv.Client().Transport.(*http.Transport).Clone()
	base.Protocols = new(http.Protocols)
	base.Protocols.SetHTTP2(true) // HTTP/2 only: no fallback to HTTP/1.1
	s.client = saferetry.NewClient(
		saferetry.WithBase(base),
		saferetry.WithBackoff(fastBackoff),
		saferetry.WithHook(func(a saferetry.Attempt) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.attempts = append(s.attempts, a)
		}),
	)
	return s
}

func (s *http2Setup) Attempts() []saferetry.Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]saferetry.Attempt(nil), s.attempts...)
}

// Over HTTP/2 (TLS, ALPN h2, nothing else allowed), the saferetry client
// carries its key on every attempt, retries a 503 met before the Middleware
// and a stream reset after the handler ran, and gets the stored answer:
// one execution.
func TestHTTP2RetriedOperationRunsOnce(t *testing.T) {
	s := newHTTP2Setup(t)
	s.front.FailNext(http.StatusServiceUnavailable)
	s.front.DropNext(1)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.srv.URL+"/payments",
		strings.NewReader(`{"amount":1500,"currency":"EUR"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	body := replayed201(t, resp, err)

	if resp.ProtoMajor != 2 {
		t.Errorf("response over %s, want HTTP/2", resp.Proto)
	}
	if got := s.payments.executions.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	if w := s.payments.Written(); !bytes.Equal(body, w[0]) || resp.Header.Get("Location") != "/payments/1" {
		t.Errorf("client got %s (Location %q), the handler wrote %s", body, resp.Header.Get("Location"), w)
	}

	seen := s.front.Seen()
	key := requireOneKey(t, seen, 3)
	if err := uuid.Validate(key); err != nil {
		t.Errorf("key %q is not the UUID saferetry generates: %v", key, err)
	}
	if got, _ := saferetry.KeyFromResponse(resp); got != key {
		t.Errorf("KeyFromResponse = %q, the server saw %q", got, key)
	}
	for i, r := range seen {
		if r.Proto != 2 {
			t.Errorf("request %d arrived over HTTP/%d, want HTTP/2", i+1, r.Proto)
		}
	}
	a := s.Attempts()
	if len(a) != 3 || a[0].StatusCode != http.StatusServiceUnavailable || a[1].Err == nil || a[2].StatusCode != http.StatusCreated {
		t.Fatalf("attempts %+v, want 503, a stream error, 201", a)
	}
	t.Logf("the reset stream, as the client saw it: %v", a[1].Err)
}
