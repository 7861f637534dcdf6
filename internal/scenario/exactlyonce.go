package scenario

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// ExactlyOnce parameters.
const (
	exactlyOnceInstances  = 3
	exactlyOnceKeys       = 50
	exactlyOnceSends      = 20 // concurrent requests per key
	exactlyOnceKeysAtOnce = 5  // keys whose sends are in flight together
	// handlerHold keeps each execution running long enough for its
	// duplicates to meet it in progress.
	handlerHold = 20 * time.Millisecond
)

// answer is what one request got back.
type answer struct {
	status   int
	replayed bool
	header   http.Header
	body     []byte
	err      error
}

// executions counts handler runs and remembers the body each run sent.
type executions struct {
	mu     sync.Mutex
	count  map[string]int
	bodies map[string][]byte
}

func newExecutions() *executions {
	return &executions{count: make(map[string]int), bodies: make(map[string][]byte)}
}

func (e *executions) record(key string, body []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count[key]++
	e.bodies[key] = body
}

func (e *executions) get(key string) (int, []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count[key], e.bodies[key]
}

// ExactlyOnce starts three instances, each its own idempotency.Middleware
// (built with opts) over store, and sends each of 50 keys 20 times at once,
// spread across the instances. It checks that each key's handler ran exactly
// once, that its first answer is that execution's 201, and that every other
// answer is a 409 in progress (with Retry-After) or a replay of the same
// status, headers and body marked Idempotent-Replayed. A last request per
// key must replay. store may be a TxStore; then the Middleware runs in
// transactional mode.
func ExactlyOnce(t *testing.T, store idempotency.Store, opts ...idempotency.Option) {
	t.Helper()
	run := testenv.RandomName("") // keeps this run's keys apart in a shared store
	execs := newExecutions()
	var serial atomic.Int64
	handler := func(inst int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get(idempotency.HeaderIdempotencyKey)
			if _, ok := idempotency.KeyFromContext(r.Context()); !ok {
				t.Errorf("key %s: handler ran without a claim in its context", key)
			}
			pause(r.Context(), handlerHold)
			body := fmt.Appendf(nil, `{"key":%q,"execution":%d,"instance":%d}`, key, serial.Add(1), inst)
			execs.record(key, body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/ops/"+key)
			w.Header().Set("Set-Cookie", "session=never-replayed")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
		})
	}
	urls := make([]string, exactlyOnceInstances)
	for i := range urls {
		urls[i] = startInstance(t, store, handler(i), opts).srv.URL
	}
	client := newHTTPClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	send := func(url, key string, amount int) answer {
		return postJSON(ctx, client, url+"/ops", key, fmt.Sprintf(`{"amount": %d, "currency": "EUR"}`, amount))
	}

	keys := make([]string, exactlyOnceKeys)
	answers := make([][]answer, exactlyOnceKeys)
	sem := make(chan struct{}, exactlyOnceKeysAtOnce)
	var all sync.WaitGroup
	for ki := range keys {
		keys[ki] = fmt.Sprintf("once-%s-%02d", run, ki)
		answers[ki] = make([]answer, exactlyOnceSends)
		all.Add(1)
		sem <- struct{}{}
		go func() {
			defer all.Done()
			defer func() { <-sem }()
			start := make(chan struct{})
			var wg sync.WaitGroup
			for si := range exactlyOnceSends {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					answers[ki][si] = send(urls[(ki+si)%len(urls)], keys[ki], ki)
				}()
			}
			close(start)
			wg.Wait()
		}()
	}
	all.Wait()

	var replays, conflicts int
	for ki, key := range keys {
		n, executed := execs.get(key)
		if n != 1 {
			t.Errorf("key %s: handler ran %d times, want exactly 1", key, n)
			continue
		}
		fresh := 0
		for _, a := range answers[ki] {
			switch {
			case a.err != nil:
				t.Errorf("key %s: request failed: %v", key, a.err)
			case a.status == http.StatusCreated && !a.replayed:
				fresh++
				if !bytes.Equal(a.body, executed) {
					t.Errorf("key %s: first answer %q, want the execution's %q", key, a.body, executed)
				}
			case a.status == http.StatusCreated:
				replays++
				checkReplay(t, key, a, executed)
			case a.status == http.StatusConflict:
				conflicts++
				if a.header.Get("Retry-After") == "" {
					t.Errorf("key %s: 409 without Retry-After", key)
				}
			default:
				t.Errorf("key %s: unexpected answer %d %s", key, a.status, a.body)
			}
		}
		if fresh != 1 {
			t.Errorf("key %s: %d unreplayed 201 answers, want exactly 1", key, fresh)
		}
		// Once settled, every instance replays.
		a := send(urls[ki%len(urls)], key, ki)
		if a.err != nil || a.status != http.StatusCreated || !a.replayed {
			t.Errorf("key %s: request after the storm = %d replayed=%v err=%v, want a replayed 201", key, a.status, a.replayed, a.err)
		} else {
			checkReplay(t, key, a, executed)
		}
	}
	t.Logf("ExactlyOnce: %d keys x %d sends over %d instances: %d replays, %d answered 409",
		exactlyOnceKeys, exactlyOnceSends, exactlyOnceInstances, replays, conflicts)
}

// checkReplay checks a replayed answer against the execution's body and the
// headers the handler set.
func checkReplay(t *testing.T, key string, a answer, executed []byte) {
	t.Helper()
	if !bytes.Equal(a.body, executed) {
		t.Errorf("key %s: replay %q, want the execution's %q", key, a.body, executed)
	}
	if got := a.header.Get("Location"); got != "/ops/"+key {
		t.Errorf("key %s: replayed Location %q, want %q", key, got, "/ops/"+key)
	}
	if got := a.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("key %s: replayed Content-Type %q", key, got)
	}
	if got := a.header.Get("Set-Cookie"); got != "" {
		t.Errorf("key %s: replay carries Set-Cookie %q", key, got)
	}
}
