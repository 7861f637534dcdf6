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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := &exactlyOnceRun{t: t, ctx: ctx, run: testenv.RandomName(""), execs: newExecutions(), client: newHTTPClient(t)}
	e.urls = make([]string, exactlyOnceInstances)
	for i := range e.urls {
		e.urls[i] = startInstance(t, store, e.handler(i), opts).srv.URL
	}
	keys, answers := e.storm()
	var replays, conflicts int
	for ki, key := range keys {
		r, c := e.check(ki, key, answers[ki])
		replays, conflicts = replays+r, conflicts+c
	}
	t.Logf("ExactlyOnce: %d keys x %d sends over %d instances: %d replays, %d answered 409",
		exactlyOnceKeys, exactlyOnceSends, exactlyOnceInstances, replays, conflicts)
}

// exactlyOnceRun is the state of one ExactlyOnce scenario.
type exactlyOnceRun struct {
	t      *testing.T
	ctx    context.Context
	run    string // keeps this run's keys apart in a shared store
	execs  *executions
	serial atomic.Int64
	client *http.Client
	urls   []string
}

// handler is instance inst's: it holds the claim a little, and answers
// with a body that names the execution.
func (e *exactlyOnceRun) handler(inst int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(idempotency.HeaderIdempotencyKey)
		if _, ok := idempotency.KeyFromContext(r.Context()); !ok {
			e.t.Errorf("key %s: handler ran without a claim in its context", key)
		}
		testenv.Pause(r.Context(), handlerHold)
		body := fmt.Appendf(nil, `{"key":%q,"execution":%d,"instance":%d}`, key, e.serial.Add(1), inst)
		e.execs.record(key, body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/ops/"+key)
		w.Header().Set("Set-Cookie", "session=never-replayed")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
}

func (e *exactlyOnceRun) send(url, key string, amount int) answer {
	return postJSON(e.ctx, e.client, url+"/ops", key, fmt.Sprintf(`{"amount": %d, "currency": "EUR"}`, amount))
}

// storm sends every key's duplicates at once, spread over the instances.
func (e *exactlyOnceRun) storm() ([]string, [][]answer) {
	keys := make([]string, exactlyOnceKeys)
	answers := make([][]answer, exactlyOnceKeys)
	sem := make(chan struct{}, exactlyOnceKeysAtOnce)
	var all sync.WaitGroup
	for ki := range keys {
		keys[ki] = fmt.Sprintf("once-%s-%02d", e.run, ki)
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
					answers[ki][si] = e.send(e.urls[(ki+si)%len(e.urls)], keys[ki], ki)
				}()
			}
			close(start)
			wg.Wait()
		}()
	}
	all.Wait()
	return keys, answers
}

// check checks one key: one execution, one fresh 201, every other answer a
// 409 with Retry-After or a byte-identical replay, and a replay from every
// instance afterwards. It returns the replays and 409s it saw.
func (e *exactlyOnceRun) check(ki int, key string, answers []answer) (replays, conflicts int) {
	t := e.t
	n, executed := e.execs.get(key)
	if n != 1 {
		t.Errorf("key %s: handler ran %d times, want exactly 1", key, n)
		return 0, 0
	}
	fresh := 0
	for _, a := range answers {
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
	a := e.send(e.urls[ki%len(e.urls)], key, ki)
	if a.err != nil || a.status != http.StatusCreated || !a.replayed {
		t.Errorf("key %s: request after the storm = %d replayed=%v err=%v, want a replayed 201", key, a.status, a.replayed, a.err)
	} else {
		checkReplay(t, key, a, executed)
	}
	return replays, conflicts
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
