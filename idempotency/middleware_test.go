package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestChecklist runs the contract's six-point checklist against the
// middleware and the memory store.
func TestChecklist(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st := newStore(t, memstore.WithClock(clock))
	app := &counter{}
	h := idempotency.Middleware(st, idempotency.WithTTL(time.Hour))(app)

	first := post(h, "op-1", `{"account":"a","amount":10}`)
	t.Run("1 request with a key gets 201", func(t *testing.T) {
		if first.Code != http.StatusCreated {
			t.Fatalf("status = %d, want 201", first.Code)
		}
		if first.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatalf("a first execution must not be marked replayed")
		}
	})
	t.Run("2 same request replays", func(t *testing.T) {
		// Member order and whitespace differ; the canonical fingerprint
		// still matches.
		again := post(h, "op-1", `{ "amount": 10, "account": "a" }`)
		wantReplay(t, again, first)
		if got, want := again.Header().Get("Location"), first.Header().Get("Location"); got != want {
			t.Fatalf("replayed Location = %q, want %q", got, want)
		}
	})
	t.Run("3 one execution", func(t *testing.T) {
		if n := app.calls.Load(); n != 1 {
			t.Fatalf("executions = %d, want 1", n)
		}
		e, found, err := st.Get(context.Background(), idempotency.Key{Key: "op-1"})
		if err != nil || !found || e.State != idempotency.StateCompleted || e.Response.Status != http.StatusCreated {
			t.Fatalf("stored entry = %+v, %v, %v; want completed 201", e, found, err)
		}
	})
	t.Run("4 different payload gets 422", func(t *testing.T) {
		w := post(h, "op-1", `{"account":"a","amount":11}`)
		wantProblem(t, w, http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		if n := app.calls.Load(); n != 1 {
			t.Fatalf("executions = %d, want 1", n)
		}
	})
	t.Run("5 after the TTL the key is new", func(t *testing.T) {
		mu.Lock()
		now = now.Add(time.Hour + time.Second)
		mu.Unlock()
		w := post(h, "op-1", `{"account":"a","amount":10}`)
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatalf("after TTL: %d replayed=%q, want a fresh 201", w.Code, w.Header().Get(idempotency.HeaderReplayed))
		}
		if n := app.calls.Load(); n != 2 {
			t.Fatalf("executions = %d, want 2", n)
		}
	})
	t.Run("6 concurrent requests across instances run once", func(t *testing.T) {
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

// panicValue is what the handler of an outcome policy case panics with.
func panicValue(name string) any {
	if strings.HasPrefix(name, "ErrAbortHandler") {
		return http.ErrAbortHandler // net/http's quiet abort: released all the same
	}
	return "boom"
}

func TestOutcomePolicy(t *testing.T) {
	tests := []struct {
		name   string
		status int
		panics bool
		stored bool
	}{
		{"200 stored", http.StatusOK, false, true},
		{"201 stored", http.StatusCreated, false, true},
		{"400 stored", http.StatusBadRequest, false, true},
		{"404 stored", http.StatusNotFound, false, true},
		{"409 stored", http.StatusConflict, false, true},
		{"408 released", http.StatusRequestTimeout, false, false},
		{"429 released", http.StatusTooManyRequests, false, false},
		{"500 released", http.StatusInternalServerError, false, false},
		{"503 released", http.StatusServiceUnavailable, false, false},
		{"panic released", 0, true, false},
		{"ErrAbortHandler released", 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			var ev events
			app := &counter{}
			app.before = func(http.ResponseWriter, *http.Request) int {
				if app.calls.Load() == 1 {
					if tt.panics {
						panic(panicValue(tt.name))
					}
					return tt.status
				}
				return http.StatusCreated
			}
			h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(app)
			var first string
			func() {
				defer func() {
					if p := recover(); (p != nil) != tt.panics || (p != nil && p != panicValue(tt.name)) {
						t.Errorf("recovered %v, want panic=%v with the handler's value", p, tt.panics)
					}
				}()
				w := post(h, "k", `{}`)
				first = w.Body.String()
				if w.Code != tt.status {
					t.Errorf("first status = %d, want %d (the handler's own answer is sent)", w.Code, tt.status)
				}
			}()
			_, found, err := st.Get(context.Background(), idempotency.Key{Key: "k"})
			if err != nil || found != tt.stored {
				t.Fatalf("after the first request: found = %v (%v), want %v", found, err, tt.stored)
			}
			w := post(h, "k", `{}`)
			if tt.stored {
				if app.calls.Load() != 1 || w.Header().Get(idempotency.HeaderReplayed) != "true" || w.Body.String() != first {
					t.Fatalf("retry: executions %d, %d %s; want a replay of %s", app.calls.Load(), w.Code, w.Body, first)
				}
				return
			}
			if app.calls.Load() != 2 || w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
				t.Fatalf("retry: executions %d, status %d; want the handler to run again", app.calls.Load(), w.Code)
			}
			rel, ok := ev.find(idempotency.OutcomeReleased)
			if !ok {
				t.Fatalf("no released event in %v", ev.outcomes())
			}
			if tt.panics != errors.Is(rel.Err, idempotency.ErrHandlerPanicked) {
				t.Fatalf("released event Err = %v", rel.Err)
			}
		})
	}
}

func TestLeaseLapseTakeover(t *testing.T) {
	st := newStore(t)
	// Instance A cannot renew: it behaves like a frozen process.
	frozen := &faultyStore{Store: st, renew: func(context.Context, idempotency.Key, int64, time.Duration) error { return nil }}
	var evA, evB events
	release := make(chan struct{})
	startedA := make(chan int64, 1)
	var tokens sync.Map
	app := &counter{}
	app.before = func(_ http.ResponseWriter, r *http.Request) int {
		tok, ok := idempotency.TokenFromContext(r.Context())
		if !ok {
			t.Errorf("no token in the handler's context")
		}
		tokens.Store(app.calls.Load(), tok)
		if app.calls.Load() == 1 {
			startedA <- tok
			<-release
		}
		return 0
	}
	a := idempotency.Middleware(frozen, idempotency.WithLease(50*time.Millisecond), idempotency.WithHook(evA.hook))(app)
	b := idempotency.Middleware(st, idempotency.WithLease(50*time.Millisecond), idempotency.WithHook(evB.hook))(app)

	aDone := make(chan string)
	go func() { aDone <- post(a, "op", `{}`).Body.String() }()
	tokA := <-startedA

	var bBody string
	testenv.Eventually(t, "B takes over", func() bool {
		w := post(b, "op", `{}`)
		if w.Code == http.StatusCreated {
			bBody = w.Body.String()
			return true
		}
		if w.Code != http.StatusConflict {
			t.Fatalf("B got %d %s while A's lease was alive or lapsing", w.Code, w.Body)
		}
		return false
	})
	if ev, ok := evB.find(idempotency.OutcomeNew); !ok || !ev.TookOver || ev.Token <= tokA {
		t.Fatalf("B's event = %+v (found %v); want a takeover with a token above %d", ev, ok, tokA)
	}
	close(release)
	aBody := <-aDone
	if aBody == bBody {
		t.Fatalf("A and B answered the same body %s", aBody)
	}
	if ev, ok := evA.find(idempotency.OutcomeLeaseLost); !ok || !errors.Is(ev.Err, idempotency.ErrStaleToken) || ev.Status != http.StatusCreated {
		t.Fatalf("A's events %v; want lease_lost with ErrStaleToken and status 201", evA.outcomes())
	}
	if _, ok := evA.find(idempotency.OutcomeNew); ok {
		t.Fatalf("A's stale completion was reported as stored")
	}
	// The record is B's: A's late completion did not overwrite it.
	w := post(a, "op", `{}`)
	if w.Body.String() != bBody || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay = %s, want B's %s", w.Body, bBody)
	}
	if n := app.calls.Load(); n != 2 {
		t.Fatalf("executions = %d, want 2", n)
	}
}

func TestLeaseLostDetectedByRenewal(t *testing.T) {
	st := newStore(t)
	var ev events
	release := make(chan struct{})
	started := make(chan struct{})
	app := &counter{before: func(http.ResponseWriter, *http.Request) int {
		close(started)
		<-release
		return 0
	}}
	stale := &faultyStore{Store: st, renew: func(context.Context, idempotency.Key, int64, time.Duration) error {
		return fmt.Errorf("renew: %w", idempotency.ErrStaleToken)
	}}
	h := idempotency.Middleware(stale, idempotency.WithLease(15*time.Millisecond), idempotency.WithHook(ev.hook))(app)
	done := make(chan int)
	go func() { done <- post(h, "k", `{}`).Code }()
	<-started
	testenv.Eventually(t, "the lost lease is reported", func() bool { _, ok := ev.find(idempotency.OutcomeLeaseLost); return ok })
	close(release)
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("status = %d; the handler's response must still be sent", code)
	}
	if got := ev.outcomes(); len(got) != 1 {
		t.Fatalf("events = %v, want only lease_lost", got)
	}
}

func TestRequestBodyLimit(t *testing.T) {
	st := newStore(t)
	var ev events
	app := &counter{}
	h := idempotency.Middleware(st, idempotency.WithMaxRequestBody(10), idempotency.WithHook(ev.hook))(app)
	wantProblem(t, post(h, "a", `{"a":12345}`), http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
	// Without a Content-Length the limit is found while reading.
	chunked := func(r *http.Request) { r.ContentLength = -1 }
	wantProblem(t, post(h, "b", `{"a":12345}`, chunked), http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
	if n := app.calls.Load(); n != 0 {
		t.Fatalf("executions = %d, want 0", n)
	}
	if _, found, _ := st.Get(context.Background(), idempotency.Key{Key: "a"}); found {
		t.Fatalf("a too-large request left an entry")
	}
	if w := post(h, "c", `{"a":1234}`, chunked); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `{\"a\":1234}`) {
		t.Fatalf("body at the limit: %d %s; want 201 echoing the body", w.Code, w.Body)
	}
	if e, ok := ev.find(idempotency.OutcomeTooLarge); !ok || e.Key != (idempotency.Key{Key: "a"}) || e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("too_large event %+v (found %v) in %v; want key a, no scope, status 413", e, ok, ev.outcomes())
	}
}

func TestKeyHandling(t *testing.T) {
	t.Run("required key missing", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithKeyRequired(true))(app)
		wantProblem(t, post(h, "", `{}`), http.StatusBadRequest, idempotency.ProblemMissingKey)
		if app.calls.Load() != 0 {
			t.Fatal("handler ran")
		}
	})
	t.Run("optional key missing passes through", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		post(h, "", `{}`)
		if w := post(h, "", `{}`); w.Code != http.StatusCreated || app.calls.Load() != 2 {
			t.Fatalf("%d, executions %d; want both to run", w.Code, app.calls.Load())
		}
	})
	t.Run("malformed", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		for _, opt := range []reqOpt{
			withHeader(idempotency.HeaderIdempotencyKey, `"unterminated`),
			withHeader(idempotency.HeaderIdempotencyKey, strings.Repeat("k", 256)),
			func(r *http.Request) { r.Header[idempotency.HeaderIdempotencyKey] = []string{"a", "b"} },
			func(r *http.Request) { r.Header[idempotency.HeaderIdempotencyKey] = []string{""} },
		} {
			p := wantProblem(t, post(h, "", `{}`, opt), http.StatusBadRequest, idempotency.ProblemMalformedKey)
			if p.Detail == "" {
				t.Errorf("malformed-key problem has no detail")
			}
		}
		if app.calls.Load() != 0 {
			t.Fatal("handler ran")
		}
	})
	t.Run("sf-string and raw name the same key", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		first := post(h, "abc", `{}`)
		wantReplay(t, post(h, `"abc"`, `{}`), first)
	})
	t.Run("unprotected methods pass through", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		send(h, http.MethodPut, "k", `{}`)
		send(h, http.MethodPut, "k", `{}`)
		send(h, http.MethodGet, `"bad`, ``)
		if app.calls.Load() != 3 {
			t.Fatalf("executions = %d, want 3", app.calls.Load())
		}
	})
	t.Run("WithMethods", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithMethods(http.MethodPut))(app)
		first := send(h, http.MethodPut, "k", `{}`)
		wantReplay(t, send(h, http.MethodPut, "k", `{}`), first)
		post(h, "k2", `{}`)
		post(h, "k2", `{}`)
		if app.calls.Load() != 3 {
			t.Fatalf("executions = %d, want 3 (POST is no longer protected)", app.calls.Load())
		}
	})
	t.Run("method, path and query are part of the fingerprint", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithMethods(http.MethodPost, http.MethodPatch))(app)
		post(h, "k", `{}`)
		wantProblem(t, send(h, http.MethodPatch, "k", `{}`), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		otherQuery := func(r *http.Request) { r.URL.RawQuery = "a=1&b=3" }
		wantProblem(t, post(h, "k", `{}`, otherQuery), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		sameQueryReordered := func(r *http.Request) { r.URL.RawQuery = "a=1&b=2" }
		if w := post(h, "k", `{}`, sameQueryReordered); w.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("reordered query: %d %s; want a replay", w.Code, w.Body)
		}
	})
}

func TestScope(t *testing.T) {
	st := newStore(t)
	app := &counter{}
	var ev events
	scope := func(r *http.Request) (string, error) {
		tenant := r.Header.Get("X-Tenant")
		if tenant == "" {
			return "", errors.New("no tenant")
		}
		return tenant, nil
	}
	h := idempotency.Middleware(st, idempotency.WithScope(scope), idempotency.WithHook(ev.hook))(app)
	a := post(h, "shared", `{}`, withHeader("X-Tenant", "a"))
	b := post(h, "shared", `{}`, withHeader("X-Tenant", "b"))
	if a.Code != http.StatusCreated || b.Code != http.StatusCreated || a.Body.String() == b.Body.String() {
		t.Fatalf("two tenants: %d %s / %d %s; want two executions", a.Code, a.Body, b.Code, b.Body)
	}
	wantReplay(t, post(h, "shared", `{}`, withHeader("X-Tenant", "a")), a)
	// A different body under another tenant's key is not a reuse.
	if w := post(h, "shared", `{"other":true}`, withHeader("X-Tenant", "c")); w.Code != http.StatusCreated {
		t.Fatalf("tenant c: %d", w.Code)
	}
	wantProblem(t, post(h, "shared", `{}`), http.StatusInternalServerError, idempotency.ProblemScopeUnavailable)
	if n := app.calls.Load(); n != 3 {
		t.Fatalf("executions = %d, want 3", n)
	}
	if e, ok := ev.find(idempotency.OutcomeReplay); !ok || e.Key != (idempotency.Key{Scope: "a", Key: "shared"}) {
		t.Fatalf("replay event key = %+v", e.Key)
	}
	if _, found, _ := st.Get(context.Background(), idempotency.Key{Scope: "b", Key: "shared"}); !found {
		t.Fatalf("no entry under scope b")
	}
}

func TestStoreFailure(t *testing.T) {
	errDown := errors.New("store down")
	down := func(t *testing.T) *faultyStore {
		return &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
			return idempotency.ClaimResult{}, errDown
		}}
	}
	t.Run("fail closed", func(t *testing.T) {
		app := &counter{}
		var ev events
		h := idempotency.Middleware(down(t), idempotency.WithHook(ev.hook))(app)
		w := post(h, "k", `{}`)
		wantProblem(t, w, http.StatusServiceUnavailable, idempotency.ProblemStoreUnavailable)
		if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
		}
		if app.calls.Load() != 0 {
			t.Fatal("handler ran with the store down")
		}
		if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || !errors.Is(e.Err, errDown) {
			t.Fatalf("events %v", ev.outcomes())
		}
	})
	t.Run("fail open", func(t *testing.T) {
		app := &counter{}
		var ev events
		h := idempotency.Middleware(down(t), idempotency.WithFailOpen(true), idempotency.WithHook(ev.hook))(app)
		if w := post(h, "k", `{"a":1}`); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `{\"a\":1}`) {
			t.Fatalf("fail open: %d %s", w.Code, w.Body)
		}
		if app.calls.Load() != 1 {
			t.Fatal("handler did not run")
		}
		if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || !errors.Is(e.Err, errDown) {
			t.Fatalf("events %v", ev.outcomes())
		}
	})
	t.Run("complete fails: retried, then the response is still sent", func(t *testing.T) {
		app := &counter{}
		var ev events
		var tries atomic.Int64
		st := &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
			tries.Add(1)
			return errDown
		}}
		h := idempotency.Middleware(st, idempotency.WithHook(ev.hook), idempotency.WithStoreTimeout(100*time.Millisecond))(app)
		if w := post(h, "k", `{}`); w.Code != http.StatusCreated {
			t.Fatalf("status = %d, want the handler's 201", w.Code)
		}
		if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || e.Status != http.StatusCreated || !errors.Is(e.Err, errDown) {
			t.Fatalf("events %v", ev.outcomes())
		}
		if n := tries.Load(); n < 3 {
			t.Fatalf("Complete tried %d times within the store timeout, want it retried", n)
		}
	})
	t.Run("fail open does not run the handler for a client that left", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithFailOpen(true))(app)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the claim fails with the request's own context error
		w := post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) })
		if app.calls.Load() != 0 {
			t.Fatalf("the handler ran unprotected (status %d) for a request whose client left", w.Code)
		}
	})
	t.Run("claim cancelled by the client", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) })
		if w.Code != http.StatusServiceUnavailable || app.calls.Load() != 0 {
			t.Fatalf("status %d executions %d; want 503 and no execution", w.Code, app.calls.Load())
		}
	})
}

func TestWaitForResult(t *testing.T) {
	t.Run("replays when the first completes", func(t *testing.T) {
		st := newStore(t)
		started := make(chan struct{})
		app := &counter{before: func(http.ResponseWriter, *http.Request) int {
			close(started)
			<-time.After(60 * time.Millisecond)
			return 0
		}}
		h := idempotency.Middleware(st, idempotency.WithWaitForResult(5*time.Second))(app)
		firstDone := make(chan string)
		go func() { firstDone <- post(h, "k", `{}`).Body.String() }()
		<-started
		w := post(h, "k", `{}`)
		first := <-firstDone
		if w.Code != http.StatusCreated || w.Body.String() != first || w.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("waiter got %d %s, want the replay of %s", w.Code, w.Body, first)
		}
	})
	t.Run("runs itself when the first releases", func(t *testing.T) {
		st := newStore(t)
		started := make(chan struct{})
		app := &counter{}
		app.before = func(http.ResponseWriter, *http.Request) int {
			if app.calls.Load() == 1 {
				close(started)
				<-time.After(40 * time.Millisecond)
				return http.StatusServiceUnavailable
			}
			return 0
		}
		h := idempotency.Middleware(st, idempotency.WithWaitForResult(5*time.Second))(app)
		firstDone := make(chan int)
		go func() { firstDone <- post(h, "k", `{}`).Code }()
		<-started
		w := post(h, "k", `{}`)
		if code := <-firstDone; code != http.StatusServiceUnavailable {
			t.Fatalf("first = %d", code)
		}
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" || app.calls.Load() != 2 {
			t.Fatalf("waiter got %d (executions %d); want its own execution", w.Code, app.calls.Load())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		st := newStore(t)
		started := make(chan struct{})
		release := make(chan struct{})
		app := &counter{before: func(http.ResponseWriter, *http.Request) int {
			close(started)
			<-release
			return 0
		}}
		h := idempotency.Middleware(st, idempotency.WithWaitForResult(30*time.Millisecond))(app)
		firstDone := make(chan struct{})
		go func() { post(h, "k", `{}`); close(firstDone) }()
		<-started
		begin := time.Now()
		w := post(h, "k", `{}`)
		if waited := time.Since(begin); waited < 30*time.Millisecond {
			t.Errorf("answered after %v, before the wait was used up", waited)
		}
		wantProblem(t, w, http.StatusConflict, idempotency.ProblemInProgress)
		close(release)
		<-firstDone
	})
	t.Run("context cancels the wait", func(t *testing.T) {
		st := newStore(t)
		started := make(chan struct{})
		release := make(chan struct{})
		app := &counter{before: func(http.ResponseWriter, *http.Request) int {
			close(started)
			<-release
			return 0
		}}
		h := idempotency.Middleware(st, idempotency.WithWaitForResult(time.Hour))(app)
		firstDone := make(chan struct{})
		go func() { post(h, "k", `{}`); close(firstDone) }()
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		w := post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) })
		if w.Code != http.StatusConflict {
			t.Fatalf("status = %d, want 409 once the context ended the wait", w.Code)
		}
		close(release)
		<-firstDone
	})
}

func TestOversizeResponse(t *testing.T) {
	st := newStore(t)
	var ev events
	var calls atomic.Int64
	big := strings.Repeat("x", 100)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		for i := 0; i < len(big); i += 10 {
			_, _ = w.Write([]byte(big[i : i+10]))
		}
	})
	h := idempotency.Middleware(st, idempotency.WithMaxResponseBody(16), idempotency.WithHook(ev.hook))(app)
	w := post(h, "k", `{}`)
	if w.Code != http.StatusCreated || w.Body.String() != big {
		t.Fatalf("first = %d %q; want the full response", w.Code, w.Body)
	}
	e, found, err := st.Get(context.Background(), idempotency.Key{Key: "k"})
	if err != nil || !found || e.Response == nil || !e.Response.Oversize || e.Response.Status != http.StatusCreated || len(e.Response.Body) != 0 {
		t.Fatalf("stored %+v (%v %v); want an oversize record of a 201", e, found, err)
	}
	for range 2 {
		r := post(h, "k", `{}`)
		p := wantProblem(t, r, http.StatusGone, idempotency.ProblemResponseTooLarge)
		if p.OriginalStatus != http.StatusCreated || r.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("problem %+v replayed=%q", p, r.Header().Get(idempotency.HeaderReplayed))
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("executions = %d, want 1", calls.Load())
	}
	if _, ok := ev.find(idempotency.OutcomeOversize); !ok {
		t.Fatalf("events %v", ev.outcomes())
	}
}

func TestReplayHeaderAllowList(t *testing.T) {
	st := newStore(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/x/1")
		h.Set("ETag", `"v1"`)
		h.Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		h.Add("Link", "</a>; rel=a")
		h.Add("Link", "</b>; rel=b")
		h.Set("Content-Location", "/x/1")
		h.Set("Set-Cookie", "session=secret")
		h.Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		h.Set("X-RateLimit-Remaining", "9")
		h.Set("RateLimit-Policy", "10;w=1")
		h.Set("Retry-After", "3")
		h.Set("X-Request-Id", "req-1")
		h.Set("X-Extra", "kept")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	})
	h := idempotency.Middleware(st, idempotency.WithReplayHeaders("x-extra", "Set-Cookie", "X-RateLimit-Remaining"))(app)
	first := post(h, "k", `{}`)
	for _, name := range []string{"Set-Cookie", "X-Request-Id", "Date"} {
		if first.Header().Get(name) == "" {
			t.Errorf("first response lacks %s: the handler's own headers go out unchanged", name)
		}
	}
	replay := post(h, "k", `{}`)
	wantReplay(t, replay, first)
	for _, name := range []string{"Content-Type", "Location", "Etag", "Last-Modified", "Content-Location", "X-Extra"} {
		if got, want := replay.Header().Get(name), first.Header().Get(name); got != want {
			t.Errorf("replayed %s = %q, want %q", name, got, want)
		}
	}
	if got := replay.Header().Values("Link"); len(got) != 2 {
		t.Errorf("replayed Link = %q, want both values", got)
	}
	for _, name := range []string{"Set-Cookie", "Date", "X-Ratelimit-Remaining", "Ratelimit-Policy", "Retry-After", "X-Request-Id"} {
		if got := replay.Header().Get(name); got != "" {
			t.Errorf("replay carries %s: %q", name, got)
		}
	}
	e, _, _ := st.Get(context.Background(), idempotency.Key{Key: "k"})
	if _, ok := e.Response.Header["Set-Cookie"]; ok {
		t.Errorf("Set-Cookie was stored")
	}
}

func TestHandlerSeesClaimAndBody(t *testing.T) {
	st := newStore(t)
	var gotKey idempotency.Key
	var gotToken int64
	var gotBody string
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ok1, ok2 bool
		gotKey, ok1 = idempotency.KeyFromContext(r.Context())
		gotToken, ok2 = idempotency.TokenFromContext(r.Context())
		if !ok1 || !ok2 {
			t.Errorf("claim missing from the context")
		}
		var v map[string]any
		_ = json.NewDecoder(r.Body).Decode(&v)
		gotBody = fmt.Sprint(v)
	})
	h := idempotency.Middleware(st, idempotency.WithScope(func(*http.Request) (string, error) { return "t1", nil }))(app)
	w := post(h, `"my key"`, `{"a":1}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if gotKey != (idempotency.Key{Scope: "t1", Key: "my key"}) || gotToken <= 0 || gotBody != "map[a:1]" {
		t.Fatalf("handler saw key %+v token %d body %s", gotKey, gotToken, gotBody)
	}
	if _, ok := idempotency.TokenFromContext(context.Background()); ok {
		t.Fatalf("token found in a bare context")
	}
	// A handler that writes nothing completes with an empty 200.
	r := post(h, `"my key"`, `{"a":1}`)
	if r.Code != http.StatusOK || r.Body.Len() != 0 || r.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay of an empty 200: %d %q", r.Code, r.Body)
	}
}

func TestHookSequence(t *testing.T) {
	st := newStore(t)
	var ev events
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook), idempotency.WithKeyRequired(true))(&counter{})
	post(h, "k", `{}`)
	post(h, "k", `{}`)
	post(h, "k", `{"a":1}`)
	post(h, "", `{}`)
	post(h, `"`, `{}`)
	want := []idempotency.Outcome{idempotency.OutcomeNew, idempotency.OutcomeReplay, idempotency.OutcomeMismatch,
		idempotency.OutcomeMissingKey, idempotency.OutcomeMalformedKey}
	if got := ev.outcomes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	if e := ev.got[0]; e.Status != http.StatusCreated || e.Token <= 0 || e.Key.Key != "k" {
		t.Fatalf("new event = %+v", e)
	}
}

func TestMiddlewarePanicsOnNilStore(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	idempotency.Middleware(nil)
}

func TestStoreCallsAfterTheHandlerAreBounded(t *testing.T) {
	var ev events
	st := &faultyStore{Store: newStore(t), complete: func(ctx context.Context, _ idempotency.Key, _ int64, _ idempotency.Response, _ time.Duration) error {
		<-ctx.Done() // a hung store
		return ctx.Err()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	// The client leaves while the handler runs: that does not cut the
	// recording short...
	app := &counter{before: func(http.ResponseWriter, *http.Request) int { cancel(); return 0 }}
	h := idempotency.Middleware(st, idempotency.WithStoreTimeout(20*time.Millisecond), idempotency.WithHook(ev.hook))(app)
	done := make(chan int)
	go func() { done <- post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) }).Code }()
	select {
	case code := <-done: // ...but the timeout does
		if code != http.StatusCreated {
			t.Fatalf("status = %d, want the handler's 201", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hung Complete was not cut short")
	}
	if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || !errors.Is(e.Err, context.Canceled) {
		t.Fatalf("events %v", ev.outcomes())
	}
}

func TestRecorderStatusRules(t *testing.T) {
	st := newStore(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints) // informational: dropped
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusInternalServerError) // superfluous: ignored
		_, _ = w.Write([]byte("ok"))
	})
	h := idempotency.Middleware(st)(app)
	first := post(h, "k", `{}`)
	if first.Code != http.StatusAccepted || first.Body.String() != "ok" {
		t.Fatalf("first = %d %q", first.Code, first.Body)
	}
	wantReplay(t, post(h, "k", `{}`), first)
}

func TestLoggerReportsLostLease(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
	st := &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
		return idempotency.ErrStaleToken
	}}
	h := idempotency.Middleware(st, idempotency.WithLogger(logger))(&counter{})
	post(h, "k", `{}`)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "lease lost") || !strings.Contains(buf.String(), "key=k") {
		t.Fatalf("log = %q", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestLeaseRenewalRetriesWithinTheLease checks that a renewal that failed
// (here: hung until its timeout) is retried before the lease lapses, not a
// whole renewal interval later, when another instance could take over.
func TestLeaseRenewalRetriesWithinTheLease(t *testing.T) {
	const lease = 900 * time.Millisecond // renewals every 300 ms
	var calls atomic.Int64
	retried := make(chan time.Time, 1)
	st := &faultyStore{Store: newStore(t), renew: func(ctx context.Context, k idempotency.Key, tok int64, d time.Duration) error {
		switch calls.Add(1) {
		case 1:
			<-ctx.Done() // a store that stopped answering, once
			return ctx.Err()
		case 2:
			retried <- time.Now()
		}
		return nil
	}}
	var claimed time.Time // written before the handler runs, read in it
	st.claim = func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
		claimed = time.Now()
		return st.Store.Claim(ctx, k, fp, l, ttl)
	}
	done := make(chan struct{})
	app := &counter{before: func(http.ResponseWriter, *http.Request) int {
		select {
		case at := <-retried:
			if since := at.Sub(claimed); since >= lease {
				t.Errorf("the renewal was retried %v after the claim, when the %v lease had lapsed", since, lease)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("the failed renewal was never retried")
		}
		close(done)
		return 0
	}}
	h := idempotency.Middleware(st, idempotency.WithLease(lease))(app)
	if w := post(h, "k", `{}`); w.Code != http.StatusCreated {
		t.Fatalf("status = %d", w.Code)
	}
	<-done
}

// TestOuterBodyLimitIs413 checks that a body cut short by an outer
// http.MaxBytesReader is answered like the Middleware's own limit.
func TestOuterBodyLimitIs413(t *testing.T) {
	app := &counter{}
	h := idempotency.Middleware(newStore(t))(app)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4)
		h.ServeHTTP(w, r)
	})
	wantProblem(t, post(outer, "k", `{"a":12345}`, func(r *http.Request) { r.ContentLength = -1 }),
		http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
	if app.calls.Load() != 0 {
		t.Fatal("handler ran")
	}
}

// TestNoBodyStatuses checks that the buffering writer refuses a body after a
// 204 or 304, as net/http's own writer does, so none is stored or replayed.
func TestNoBodyStatuses(t *testing.T) {
	for _, status := range []int{http.StatusNoContent, http.StatusNotModified} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			st := newStore(t)
			var writeErr error
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				_, writeErr = w.Write([]byte("body"))
			})
			h := idempotency.Middleware(st)(app)
			first := post(h, "k", `{}`)
			if first.Code != status || !errors.Is(writeErr, http.ErrBodyNotAllowed) {
				t.Fatalf("status %d, Write error %v; want %d and ErrBodyNotAllowed", first.Code, writeErr, status)
			}
			e, found, err := st.Get(context.Background(), idempotency.Key{Key: "k"})
			if err != nil || !found || e.Response == nil || len(e.Response.Body) != 0 {
				t.Fatalf("stored %+v (%v, %v); want a %d without a body", e.Response, found, err, status)
			}
			wantReplay(t, post(h, "k", `{}`), first)
		})
	}
}

// TestHandlerContextFollowsTheRequest checks that the handler's context keeps
// the request context's values and cancellation, also through contexts
// derived from it.
func TestHandlerContextFollowsTheRequest(t *testing.T) {
	type ctxKey struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "outer"))
	defer cancel()
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		child, stop := context.WithTimeout(r.Context(), time.Hour)
		defer stop()
		if got := child.Value(ctxKey{}); got != "outer" {
			t.Errorf("request value = %v, want outer", got)
		}
		if k, ok := idempotency.KeyFromContext(child); !ok || k.Key != "k" {
			t.Errorf("KeyFromContext(derived) = %+v, %v", k, ok)
		}
		cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Errorf("the request's cancellation did not reach a derived context")
		}
	})
	h := idempotency.Middleware(newStore(t))(app)
	post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) })
}

// TestTTLShorterThanHandler checks that a TTL shorter than the handler's run
// does not free the key while the handler still holds it: the claim lives at
// least one lease, and renewals keep it, so a duplicate meets 409.
func TestTTLShorterThanHandler(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	st := newStore(t, memstore.WithClock(clock))

	started, release := make(chan struct{}), make(chan struct{})
	app := &counter{}
	app.before = func(http.ResponseWriter, *http.Request) int {
		if app.calls.Load() == 1 {
			close(started)
			<-release
		}
		return 0
	}
	h := idempotency.Middleware(st, idempotency.WithTTL(100*time.Millisecond), idempotency.WithLease(time.Minute))(app)

	first := make(chan int)
	go func() { first <- post(h, "slow", `{}`).Code }()
	<-started
	advance(time.Second) // ten TTLs pass while the handler runs
	if w := post(h, "slow", `{}`); w.Code != http.StatusConflict {
		t.Errorf("duplicate while the handler runs past the TTL = %d %s, want 409", w.Code, w.Body)
	}
	close(release)
	if code := <-first; code != http.StatusCreated {
		t.Fatalf("first request = %d, want 201", code)
	}
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}
