package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/replaymix"
	"github.com/saferetry/saferetry/internal/testenv"
)

// KeyReused parameters.
const (
	keyReusedInstances = 3
	keyReusedKeys      = 3
	// keyReusedReplays replays each key enough times, spread over the
	// instances, for an adaptive store to take its replay fast path (see
	// internal/replaymix) for the requests that follow.
	keyReusedReplays = 2 * replaymix.Window
)

// KeyReused starts three instances, each its own idempotency.Middleware
// (built with opts) over store, and for each of three keys sends a first
// request whose handler holds the key until released. While it runs, the
// same key with another body goes to every instance at once; once it has
// answered, again to every instance, then the first body often enough to
// turn an adaptive store's replay fast path on, and the other body to
// every instance once more. It checks that the other body never ran the
// handler and was answered 422 ProblemKeyReused every time, that the first
// request got its execution's 201 and every later send of the first body a
// byte-identical replay: a store that loses, or misreports, the
// fingerprint of the entry in the way (reporting the caller's, say) is
// caught in the state where it does so. store may be a TxStore; then the
// Middleware runs in transactional mode, where a claim cannot read a key
// whose claim is not committed yet and reports it in progress under the
// caller's own fingerprint (see idempotency.TxStore): there a 409 with
// Retry-After is also accepted while the key is in progress.
func KeyReused(t *testing.T, store idempotency.Store, opts ...idempotency.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, transactional := store.(idempotency.TxStore)
	k := &keyReusedRun{t: t, ctx: ctx, run: testenv.RandomName(""), execs: newExecutions(), client: newHTTPClient(t),
		started: make(chan string, keyReusedKeys), release: make(chan struct{})}
	k.urls = make([]string, keyReusedInstances)
	for i := range k.urls {
		k.urls[i] = startInstance(t, store, k.handler(), opts).srv.URL
	}
	keys := make([]string, keyReusedKeys)
	firsts := make([]<-chan answer, keyReusedKeys)
	answered := make(chan string, keyReusedKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("reused-%s-%d", k.run, i)
		first := make(chan answer, 1)
		go func() {
			first <- k.send(k.urls[i%len(k.urls)], keys[i], "first")
			answered <- keys[i]
		}()
		firsts[i] = first
	}
	// Every handler holds its key before the other body is sent; a first
	// request answered before release was never held.
	for range keys {
		select {
		case <-k.started:
		case key := <-answered:
			close(k.release)
			a := <-firsts[slices.Index(keys, key)]
			t.Fatalf("key %s: the first request was answered %d %s (err %v) without its handler holding the key", key, a.status, a.body, a.err)
		case <-ctx.Done():
			close(k.release)
			t.Fatalf("scenario: the first requests' handlers did not all start: %v", ctx.Err())
		}
	}
	k.sendOther(keys, "in progress", transactional)
	close(k.release)
	executed := make([][]byte, len(keys))
	for i, key := range keys {
		a := <-firsts[i]
		n, body := k.execs.get(key + " first")
		executed[i] = body
		if a.err != nil || a.status != http.StatusCreated || a.replayed || n != 1 || !bytes.Equal(a.body, body) {
			t.Errorf("key %s: first request = %d replayed=%v %q err=%v after %d executions, want the execution's 201",
				key, a.status, a.replayed, a.body, a.err, n)
		}
	}
	k.sendOther(keys, "completed", false)
	for i, key := range keys {
		for r := range keyReusedReplays {
			a := k.send(k.urls[r%len(k.urls)], key, "first")
			if a.err != nil || a.status != http.StatusCreated || !a.replayed || !bytes.Equal(a.body, executed[i]) {
				t.Fatalf("key %s: send %d of the first body = %d replayed=%v %q err=%v, want a replay of %q",
					key, r, a.status, a.replayed, a.body, a.err, executed[i])
			}
		}
	}
	k.sendOther(keys, "completed, after many replays", false)
	for _, key := range keys {
		if n, _ := k.execs.get(key + " other"); n != 0 {
			t.Errorf("key %s: the other body ran the handler %d times, want never", key, n)
		}
	}
}

// keyReusedRun is the state of one KeyReused scenario.
type keyReusedRun struct {
	t       *testing.T
	ctx     context.Context
	run     string // keeps this run's keys apart in a shared store
	execs   *executions
	client  *http.Client
	urls    []string
	started chan string   // a first request's handler holds its key
	release chan struct{} // closed: the first requests' handlers answer
}

// handler records each execution under the key and the body's "op", and
// holds the first body's key until release is closed.
func (k *keyReusedRun) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(idempotency.HeaderIdempotencyKey)
		var req struct{ Op string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body := fmt.Appendf(nil, `{"key":%q,"op":%q}`, key, req.Op)
		k.execs.record(key+" "+req.Op, body)
		if req.Op == "first" {
			select {
			case k.started <- key:
			default: // a store that runs the first body again
			}
			select {
			case <-k.release:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
}

func (k *keyReusedRun) send(url, key, op string) answer {
	return postJSON(k.ctx, k.client, url+"/ops", key, fmt.Sprintf(`{"op":%q,"amount":10}`, op))
}

// sendOther sends every key with the other body to every instance at
// once, and checks each answer: a 422 ProblemKeyReused, or, when
// conflictAllowed, a 409 with Retry-After.
func (k *keyReusedRun) sendOther(keys []string, state string, conflictAllowed bool) {
	answers := make([][]answer, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		answers[i] = make([]answer, len(k.urls))
		for j, url := range k.urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i][j] = k.send(url, key, "other")
			}()
		}
	}
	wg.Wait()
	for i, key := range keys {
		for j, a := range answers[i] {
			var p struct{ Type string }
			switch {
			case a.err != nil:
				k.t.Errorf("key %s, %s: the other body at instance %d: %v", key, state, j, a.err)
			case conflictAllowed && a.status == http.StatusConflict && a.header.Get("Retry-After") != "":
			case a.status != http.StatusUnprocessableEntity || a.replayed || json.Unmarshal(a.body, &p) != nil || p.Type != idempotency.ProblemKeyReused:
				k.t.Errorf("key %s, %s: the other body at instance %d = %d replayed=%v %s, want 422 %s",
					key, state, j, a.status, a.replayed, a.body, idempotency.ProblemKeyReused)
			}
		}
	}
}
