package idempotency_test

import (
	"context"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// checklist is the fixture of one checklist step: a middleware over a
// memory store on a clock the step can move, and the first request of
// operation op-1 already answered.
type checklist struct {
	st    *memstore.Store
	app   *counter
	h     http.Handler
	first *httptest.ResponseRecorder
	mu    sync.Mutex
	now   time.Time
}

func newChecklist(t *testing.T) *checklist {
	c := &checklist{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), app: &counter{}}
	c.st = newStore(t, memstore.WithClock(func() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }))
	c.h = idempotency.Middleware(c.st, idempotency.WithTTL(time.Hour))(c.app)
	c.first = post(c.h, "op-1", `{"account":"a","amount":10}`)
	return c
}

func (c *checklist) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestChecklist runs the contract's six-point checklist against the
// middleware and the memory store; each step has a fixture of its own, so
// any one runs alone.
func TestChecklist(t *testing.T) {
	t.Run("1 request with a key gets 201", func(t *testing.T) {
		c := newChecklist(t)
		if c.first.Code != http.StatusCreated {
			t.Fatalf("status = %d, want 201", c.first.Code)
		}
		if c.first.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatalf("a first execution must not be marked replayed")
		}
	})
	t.Run("2 same request replays", func(t *testing.T) {
		c := newChecklist(t)
		// Member order and whitespace differ; the canonical fingerprint
		// still matches.
		again := post(c.h, "op-1", `{ "amount": 10, "account": "a" }`)
		wantReplay(t, again, c.first)
		if got, want := again.Header().Get("Location"), c.first.Header().Get("Location"); got != want {
			t.Fatalf("replayed Location = %q, want %q", got, want)
		}
	})
	t.Run("3 one execution", func(t *testing.T) {
		c := newChecklist(t)
		post(c.h, "op-1", `{"account":"a","amount":10}`)
		if n := c.app.calls.Load(); n != 1 {
			t.Fatalf("executions = %d, want 1", n)
		}
		e, found, err := c.st.Get(context.Background(), idempotency.Key{Key: "op-1"})
		if err != nil || !found || e.State != idempotency.StateCompleted || e.Response.Status != http.StatusCreated {
			t.Fatalf("stored entry = %+v, %v, %v; want completed 201", e, found, err)
		}
	})
	t.Run("4 different payload gets 422", func(t *testing.T) {
		c := newChecklist(t)
		w := post(c.h, "op-1", `{"account":"a","amount":11}`)
		wantProblem(t, w, http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		if n := c.app.calls.Load(); n != 1 {
			t.Fatalf("executions = %d, want 1", n)
		}
	})
	t.Run("5 after the TTL the key is new", func(t *testing.T) {
		c := newChecklist(t)
		c.advance(time.Hour + time.Second)
		w := post(c.h, "op-1", `{"account":"a","amount":10}`)
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatalf("after TTL: %d replayed=%q, want a fresh 201", w.Code, w.Header().Get(idempotency.HeaderReplayed))
		}
		if n := c.app.calls.Load(); n != 2 {
			t.Fatalf("executions = %d, want 2", n)
		}
	})
	t.Run("6 concurrent requests across instances run once", func(t *testing.T) {
		st := newStore(t)
		app := &counter{before: func(http.ResponseWriter, *http.Request) int {
			<-time.After(10 * time.Millisecond)
			return 0
		}}
		var instances []http.Handler
		for range 3 {
			instances = append(instances, idempotency.Middleware(st)(app))
		}
		codes := concurrently(60, func(i int) *result {
			w := post(instances[i%3], "op-6", `{"x":1}`)
			return &result{code: w.Code, body: w.Body.String(), replayed: w.Header().Get(idempotency.HeaderReplayed) == "true"}
		})
		checkOnce(t, codes, app)
	})
}

type result struct {
	code     int
	body     string
	replayed bool
}

// concurrently runs f(i) for i in [0, n) at once and returns the results.
func concurrently(n int, f func(i int) *result) []*result {
	out := make([]*result, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			out[i] = f(i)
		}()
	}
	start.Done()
	done.Wait()
	return out
}

// checkOnce asserts one execution, one fresh 201, and that every other
// answer is a 409 or a replay of the same body.
func checkOnce(t *testing.T, results []*result, app *counter) {
	t.Helper()
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
	var fresh *result
	for _, r := range results {
		if r.code == http.StatusCreated && !r.replayed {
			if fresh != nil {
				t.Fatalf("two fresh answers")
			}
			fresh = r
		}
	}
	if fresh == nil {
		t.Fatalf("no fresh 201 among %d answers", len(results))
	}
	conflicts, replays := 0, 0
	for _, r := range results {
		switch {
		case r == fresh:
		case r.code == http.StatusConflict:
			conflicts++
		case r.code == http.StatusCreated && r.replayed && r.body == fresh.body:
			replays++
		default:
			t.Fatalf("unexpected answer %d replayed=%v %s", r.code, r.replayed, r.body)
		}
	}
	t.Logf("%d answers: 1 fresh, %d in progress, %d replays", len(results), conflicts, replays)
}

func TestThousandConcurrentRequestsOneKey(t *testing.T) {
	st := newStore(t)
	app := &counter{before: func(http.ResponseWriter, *http.Request) int {
		<-time.After(20 * time.Millisecond)
		return 0
	}}
	h := idempotency.Middleware(st)(app)
	results := concurrently(1000, func(int) *result {
		w := post(h, "one-key", `{"amount":1}`)
		return &result{code: w.Code, body: w.Body.String(), replayed: w.Header().Get(idempotency.HeaderReplayed) == "true"}
	})
	checkOnce(t, results, app)
}
