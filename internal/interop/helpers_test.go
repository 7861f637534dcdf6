package interop_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// front stands in front of a handler, outside the idempotency Middleware,
// and does to protected requests what a lossy network would: answer a status
// before anything runs, or lose the answer after the Middleware recorded it.
// It records the key and protocol of every request it sees. It is safe for
// concurrent use.
type front struct {
	next http.Handler

	mu   sync.Mutex
	fail []int // statuses answered to the next requests, before next runs
	drop int   // how many of the following answers are lost after next ran
	seen []seen
}

// holdFirst holds a handler's first execution: once hold is set, the
// first wait after it closes entered and waits for hold to close.
type holdFirst struct {
	hold    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (h *holdFirst) wait() {
	if h.hold == nil {
		return
	}
	// Only the first execution waits, so that a test of a broken set-up
	// fails instead of hanging.
	held := false
	h.once.Do(func() { close(h.entered); held = true })
	if held {
		<-h.hold
	}
}

// seen is what one request carried, as the server saw it.
type seen struct {
	Key   string
	Proto int
}

func newFront(next http.Handler) *front { return &front{next: next} }

// FailNext answers the next request with status, before the Middleware.
func (f *front) FailNext(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = append(f.fail, status)
}

// DropNext lets the next n requests run to the end, their outcome recorded
// by the Middleware, and then loses their answers: an HTTP/1 connection is
// closed without a byte of the answer, an HTTP/2 stream is reset.
func (f *front) DropNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop += n
}

// Seen returns a copy of what every request carried, in arrival order.
func (f *front) Seen() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, seen{Key: r.Header.Get(idempotency.HeaderIdempotencyKey), Proto: r.ProtoMajor})
	status, drop := 0, false
	switch {
	case len(f.fail) > 0:
		status, f.fail = f.fail[0], f.fail[1:]
	case f.drop > 0:
		f.drop--
		drop = true
	}
	f.mu.Unlock()

	switch {
	case status != 0:
		http.Error(w, http.StatusText(status), status)
	case drop:
		// The Middleware answers into a recorder nobody reads; the panic
		// makes net/http close the connection (HTTP/1) or reset the
		// stream (HTTP/2) with nothing of the answer sent.
		f.next.ServeHTTP(httptest.NewRecorder(), r)
		panic(http.ErrAbortHandler)
	default:
		f.next.ServeHTTP(w, r)
	}
}

// requireOneKey checks that want requests arrived and all carried one
// non-empty key, and returns it.
func requireOneKey(t *testing.T, got []seen, want int) string {
	t.Helper()
	if len(got) != want {
		t.Fatalf("server saw %d requests %v, want %d", len(got), got, want)
	}
	for _, s := range got {
		if s.Key != got[0].Key {
			t.Fatalf("keys differ between attempts: %v", got)
		}
	}
	if got[0].Key == "" {
		t.Fatalf("the requests carried no %s", idempotency.HeaderIdempotencyKey)
	}
	return got[0].Key
}

// fastBackoff keeps the saferetry client's waits to a millisecond, so that
// retries cost the tests no time; the retry decisions are unchanged.
func fastBackoff() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }

// newStore returns a memstore closed when the test ends.
func newStore(t *testing.T) *memstore.Store {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	return st
}

// replayed201 reads and closes the body of resp, the answer of a client's
// Do (with its err), and fails t unless it is the replayed 201; it returns
// the body.
func replayed201(t *testing.T, resp *http.Response, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("got %d (replayed %q) %s, want the replayed 201", resp.StatusCode, resp.Header.Get(idempotency.HeaderReplayed), body)
	}
	return body
}
