package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// Leases of the fault scenarios in StoreFaults: short, so that each runs in
// a few seconds, and long enough for the latencies they inject. The slow
// store scenario gets a longer one, which gives a loaded machine more slack
// in absolute terms for the same fractions.
const (
	faultLease = 600 * time.Millisecond
	slowLease  = 2 * time.Second
)

// StoreFaults runs every store fault scenario of this package on the store
// that at builds, whose server listens at target, each as a subtest.
func StoreFaults(t *testing.T, at StoreAt, target string) {
	t.Run("SlowStoreKeepsTheLease", func(t *testing.T) {
		for _, div := range []time.Duration{10, 5} {
			t.Run(fmt.Sprintf("latency lease/%d", div), func(t *testing.T) { SlowStore(t, at, target, slowLease, slowLease/div) })
		}
	})
	t.Run("StoreSlowerThanTheLease", func(t *testing.T) { StoreSlowerThanLease(t, at, target, slowLease/2, slowLease*3/8) })
	t.Run("PausedHolderWritesNothing", func(t *testing.T) { PausedHolder(t, at, target, faultLease/2) })
	t.Run("CutDuringComplete", func(t *testing.T) { CutDuringComplete(t, at, target, faultLease*2) })
	t.Run("ThousandWaitersKeepTheHoldersLease", func(t *testing.T) { ManyWaiters(t, at, target, faultLease) })
}

// StoreAt builds a store of the kind under test that reaches its server at
// addr (host:port) through a connection pool of poolSize, sharing its
// entries with every other store StoreAt builds in the same test (the same
// table, the same key prefix). The store fault scenarios put a
// testenv.Proxy in front of the real server and hand its address to StoreAt.
// The scenarios call it from the test's goroutine only; the stores it
// returns are used from many at once.
type StoreAt func(t *testing.T, addr string, poolSize int) idempotency.Store

// eventCounts counts a Middleware's events.
type eventCounts struct {
	mu  sync.Mutex
	got map[idempotency.Outcome]int
	err []error
}

func (r *eventCounts) hook(ev idempotency.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[idempotency.Outcome]int{}
	}
	r.got[ev.Outcome]++
	if ev.Err != nil {
		r.err = append(r.err, fmt.Errorf("%s: %w", ev.Outcome, ev.Err))
	}
}

func (r *eventCounts) count(o idempotency.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[o]
}

func (r *eventCounts) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%v %v", r.got, r.err)
}

// call sends one protected POST with key through h and returns the answer.
func call(ctx context.Context, h http.Handler, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`)).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idempotency.HeaderIdempotencyKey, key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// callAsync sends call(ctx, h, key) from a goroutine of its own and returns
// the channel that gets its answer.
func callAsync(ctx context.Context, h http.Handler, key string) <-chan *httptest.ResponseRecorder {
	answer := make(chan *httptest.ResponseRecorder, 1)
	go func() { answer <- call(ctx, h, key) }()
	return answer
}

// instancesAB starts the two instances of the Middleware, with the given
// lease, that PausedHolder and CutDuringComplete set against each other:
// a, running handlerA, whose store (made by at) reaches the server at
// target through proxyA and whose events evA counts, and b, running
// handlerB, whose store reaches the server directly.
func instancesAB(t *testing.T, at StoreAt, target string, lease time.Duration, handlerA, handlerB http.Handler) (proxyA *testenv.Proxy, a, b http.Handler, evA *eventCounts) {
	t.Helper()
	proxyA = testenv.StartProxy(t, target)
	evA = new(eventCounts)
	a = idempotency.Middleware(at(t, proxyA.Addr(), 4), idempotency.WithLease(lease), idempotency.WithHook(evA.hook))(handlerA)
	b = idempotency.Middleware(at(t, target, 4), idempotency.WithLease(lease))(handlerB)
	return proxyA, a, b, evA
}

// runCounter counts a handler's runs per key, and the runs cancelled with
// idempotency.ErrLeaseLost.
type runCounter struct {
	mu        sync.Mutex
	runs      map[string]int
	cancelled atomic.Int64
}

func (e *runCounter) add(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs == nil {
		e.runs = map[string]int{}
	}
	e.runs[key]++
	return e.runs[key]
}

func (e *runCounter) of(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

// Warm-up requests: holding answers those whose key starts with warmPrefix
// at once, and holds those with warmRenewPrefix long enough for a renewal.
const (
	warmPrefix      = "warm-"
	warmRenewPrefix = "warm-renew-"
)

// holding returns a handler that counts its run and holds for d (or until
// its context ends, which it records), then answers 201.
func (e *runCounter) holding(d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := idempotency.KeyFromContext(r.Context())
		n := e.add(k)
		hold := d
		switch {
		case strings.HasPrefix(k, warmRenewPrefix):
			hold = d / 3
		case strings.HasPrefix(k, warmPrefix):
			hold = 0
		}
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			if errors.Is(context.Cause(r.Context()), idempotency.ErrLeaseLost) {
				e.cancelled.Add(1)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d of %s", n, k)
	})
}

// SlowStore checks that a lease holds while every store call is slow, as
// long as the latency stays within the documented fraction of the lease:
// three instances reach the store through a proxy adding one-way latency
// to every byte; per key, a handler holds for 2.5 leases while duplicates
// keep arriving at the other instances. Every key must execute exactly once,
// no lease may be lost and no handler cancelled. Clients retry 409s (a claim
// that came back too late to start is one) until they get the answer.
func SlowStore(t *testing.T, at StoreAt, target string, lease, latency time.Duration) {
	t.Helper()
	const keys = 4
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proxy, inst, ex, ev := proxied(t, at, target, lease, lease*5/2)
	var warm sync.WaitGroup
	for i := range inst {
		// Warm up the pools, the statements and the renewals before the
		// latency starts, as a busy service's are.
		for j := range 4 {
			call(ctx, inst[i], testenv.RandomName(fmt.Sprintf("%s%d-%d-", warmPrefix, i, j)))
		}
		warm.Add(1)
		go func() {
			defer warm.Done()
			call(ctx, inst[i], testenv.RandomName(warmRenewPrefix))
		}()
	}
	warm.Wait()
	proxy.SetLatency(latency)
	run := testenv.RandomName("slow-")
	var wg sync.WaitGroup
	answers := make([]string, keys)
	for k := range keys {
		key := fmt.Sprintf("%s-%d", run, k)
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			// Duplicates at the other instances while the first runs.
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 1; ; i++ {
					select {
					case <-done:
						return
					case <-time.After(lease / 4):
					}
					// A duplicate may be the one that executes (when the
					// first claim came back too late to start); the
					// execution count tells whether anything ran twice.
					if w := call(ctx, inst[(k+i)%3], key); w.Code != http.StatusConflict && w.Code != http.StatusCreated {
						t.Errorf("duplicate of %s answered %d %q; want 409, 201 or a replay", key, w.Code, w.Body)
					}
				}
			}()
			defer close(done)
			for ctx.Err() == nil {
				w := call(ctx, inst[k%3], key)
				if w.Code == http.StatusCreated {
					answers[k] = w.Body.String()
					return
				}
				if w.Code != http.StatusConflict {
					t.Errorf("key %s answered %d %q", key, w.Code, w.Body)
					return
				}
				testenv.Pause(ctx, lease/4)
			}
		}()
	}
	wg.Wait()
	for k := range keys {
		key := fmt.Sprintf("%s-%d", run, k)
		if n := ex.of(key); n != 1 {
			t.Errorf("key %s executed %d times, want 1", key, n)
		}
		if answers[k] == "" {
			t.Errorf("key %s never answered 201", key)
		}
	}
	if n := ev.count(idempotency.OutcomeLeaseLost); n != 0 {
		t.Errorf("%d leases lost with a one-way latency of %v on a %v lease; events %v", n, latency, lease, ev)
	}
	if n := ex.cancelled.Load(); n != 0 {
		t.Errorf("%d handlers cancelled for a lease that could not be kept", n)
	}
	t.Logf("SlowStore: lease %v, one-way latency %v: %d keys executed once each; %d late claims answered 409; events %v",
		lease, latency, keys, countErr(ev, "the claim's answer came"), ev.got)
}

// proxied starts a proxy to the store's server at target and three
// instances of the Middleware with the given lease, whose stores (made by
// at) reach the server through it; each runs ex.holding(hold) and counts
// its events in ev, the counters it returns with them.
func proxied(t *testing.T, at StoreAt, target string, lease, hold time.Duration) (proxy *testenv.Proxy, inst [3]http.Handler, ex *runCounter, ev *eventCounts) {
	t.Helper()
	proxy = testenv.StartProxy(t, target)
	ex, ev = new(runCounter), new(eventCounts)
	for i := range inst {
		inst[i] = idempotency.Middleware(at(t, proxy.Addr(), 4), idempotency.WithLease(lease), idempotency.WithHook(ev.hook))(ex.holding(hold))
	}
	return proxy, inst, ex, ev
}

func countErr(r *eventCounts, substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, err := range r.err {
		if strings.Contains(err.Error(), substr) {
			n++
		}
	}
	return n
}

// StoreSlowerThanLease checks what happens when the store's round trip is
// longer than the lease allows, and once it is fast again. While it is
// slow, a claim's answer arrives after half its lease, so no handler
// starts at all: every request is answered 409 (or 503, a store call that
// timed out). Once it is fast, the same clients, still on the same
// instances, get the key's one execution: it runs exactly once, while
// duplicates keep arriving at the other instances, and every client gets
// its 201.
func StoreSlowerThanLease(t *testing.T, at StoreAt, target string, lease, latency time.Duration) {
	t.Helper()
	const clients = 6
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The one execution holds for half the lease: duplicates meet it in
	// progress, and it needs no renewal to land its outcome in time.
	proxy, inst, ex, ev := proxied(t, at, target, lease, lease/2)
	for i := range inst {
		call(ctx, inst[i], testenv.RandomName(warmPrefix))
	}
	proxy.SetLatency(latency)
	key := testenv.RandomName("slower-")
	var wg sync.WaitGroup
	var statuses sync.Map
	end := time.Now().Add(4 * lease)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				w := call(ctx, inst[i%3], key)
				statuses.Store(w.Code, true)
				if w.Code != http.StatusConflict && w.Code != http.StatusServiceUnavailable {
					t.Errorf("answered %d %q while the store was slower than the lease; want 409 or 503", w.Code, w.Body)
				}
			}
		}()
	}
	wg.Wait()
	var seen []int
	statuses.Range(func(k, _ any) bool { seen = append(seen, k.(int)); return true })
	if n := ex.of(key); n != 0 {
		t.Errorf("the key executed %d times while every claim's answer came too late to start; want 0", n)
	}
	proxy.SetLatency(0)
	answers := make([]string, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A second execution fails the scenario: no need to wait for
			// the store to settle after it.
			for ctx.Err() == nil && ex.of(key) <= 1 {
				w := call(ctx, inst[i%3], key)
				switch w.Code {
				case http.StatusCreated:
					answers[i] = w.Body.String()
					return
				case http.StatusConflict, http.StatusServiceUnavailable:
					testenv.Pause(ctx, lease/10)
				default:
					t.Errorf("answered %d %q once the store was fast again; want 409, 503 or the one execution's 201", w.Code, w.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := ex.of(key); n != 1 {
		t.Errorf("the key executed %d times once the store was fast again, want 1", n)
	} else {
		for i, a := range answers {
			if want := "run 1 of " + key; a != want {
				t.Errorf("client %d got %q once the store was fast again, want %q", i, a, want)
			}
		}
	}
	t.Logf("StoreSlowerThanLease: lease %v, one-way latency %v: statuses %v while slow, then %d executions; events %v", lease, latency, seen, ex.of(key), ev.got)
}

// fence is a register that takes a write only with a fencing token at least
// as great as any it took before: what a handler's own fenced write (a
// database row with the token, a downstream API that compares it) does.
type fence struct {
	mu     sync.Mutex
	max    int64
	writes []int64
}

func (f *fence) write(token int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.max {
		return false
	}
	f.max = token
	f.writes = append(f.writes, token)
	return true
}

// PausedHolder checks what a holder that stops reaching the store (a
// paused process, a partition) finds when it comes back: instance A's
// handler runs, then A's store traffic is frozen past its lease; A's handler
// context is cancelled with idempotency.ErrLeaseLost; instance B takes the
// key over and runs; when A's handler goes on anyway and tries its write, its
// fencing token is refused. A writes nothing, and B's outcome is the one
// stored and replayed.
func PausedHolder(t *testing.T, at StoreAt, target string, lease time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var reg fence
	var causeA atomic.Value
	enteredA, wakeA := make(chan int64, 1), make(chan struct{})
	handlerA := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := idempotency.TokenFromContext(r.Context())
		enteredA <- tok
		<-r.Context().Done() // frozen, until the Middleware gives up on the lease
		causeA.Store(context.Cause(r.Context()))
		<-wakeA // the process resumes, mid-operation
		if reg.write(tok) {
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.WriteHeader(http.StatusConflict) // the fenced write was refused
	})
	handlerB := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := idempotency.TokenFromContext(r.Context())
		if !reg.write(tok) {
			t.Errorf("B's fenced write with token %d was refused", tok)
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "B with token %d", tok)
	})
	proxyA, a, b, evA := instancesAB(t, at, target, lease, handlerA, handlerB)
	key, answerA, tokA := startHolder(ctx, t, a, enteredA)
	proxyA.SetLatency(time.Hour) // A's store traffic stops: renewals hang
	var answerB *httptest.ResponseRecorder
	testenv.Eventually(t, "B takes the key over", func() bool {
		answerB = call(ctx, b, key)
		return answerB.Code == http.StatusCreated
	})
	if c, _ := causeA.Load().(error); !errors.Is(c, idempotency.ErrLeaseLost) {
		t.Fatalf("A's handler context ended with cause %v, want ErrLeaseLost", c)
	}
	// A comes back: its held bytes are lost with its connections.
	proxyA.Cut()
	proxyA.SetLatency(0)
	close(wakeA)
	<-answerA
	reg.mu.Lock()
	writes := append([]int64(nil), reg.writes...)
	reg.mu.Unlock()
	if len(writes) != 1 || writes[0] <= tokA {
		t.Fatalf("fenced writes %v; want only B's, with a token above A's %d", writes, tokA)
	}
	testenv.Eventually(t, "A reports the lost lease", func() bool { return evA.count(idempotency.OutcomeLeaseLost) == 1 })
	if w := call(ctx, b, key); w.Body.String() != answerB.Body.String() || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay = %d %q, want B's %q", w.Code, w.Body, answerB.Body)
	}
}

// startHolder sends requests with new keys to a until its handler runs
// (it reports its token on entered), and returns that request's key, the
// channel of its answer and the token. A request that a loaded machine
// makes miss its short lease before the handler starts is answered
// without running it; the next key is tried then.
func startHolder(ctx context.Context, t *testing.T, a http.Handler, entered <-chan int64) (string, <-chan *httptest.ResponseRecorder, int64) {
	t.Helper()
	for {
		key := testenv.RandomName("paused-")
		answer := callAsync(ctx, a, key)
		select {
		case tok := <-entered:
			return key, answer, tok
		case w := <-answer:
			t.Logf("PausedHolder: A answered %d before its handler ran; trying a new key", w.Code)
		case <-ctx.Done():
			t.Fatal("PausedHolder: A's handler never ran")
		}
	}
}

// CutDuringComplete checks that a store cut of under a second while the
// outcome is being recorded does not leave the key in progress until its
// lease lapses: the Complete is retried and lands once the store is back,
// duplicates meanwhile get 409, and nothing executes twice.
func CutDuringComplete(t *testing.T, at StoreAt, target string, lease time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var runs atomic.Int64
	entered, finish := make(chan struct{}), make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if runs.Load() == 1 {
			close(entered)
			<-finish
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", runs.Load())
	})
	proxyA, a, b, evA := instancesAB(t, at, target, lease, app, app)
	key := testenv.RandomName("cut-")
	answerA := callAsync(ctx, a, key)
	<-entered
	proxyA.Stop() // the store goes away just as the handler returns
	close(finish)
	cutFor := min(lease*2/3, 700*time.Millisecond)
	cutEnd := time.Now().Add(cutFor)
	for time.Now().Before(cutEnd) {
		if w := call(ctx, b, key); w.Code != http.StatusConflict {
			t.Fatalf("duplicate during the cut = %d %q, want 409", w.Code, w.Body)
		}
		testenv.Pause(ctx, cutFor/5)
	}
	proxyA.Restart(t)
	first := <-answerA
	if first.Code != http.StatusCreated {
		t.Fatalf("A answered %d, want 201", first.Code)
	}
	if n := evA.count(idempotency.OutcomeNew); n != 1 {
		t.Fatalf("A's events %v; want the outcome stored once the store was back", evA)
	}
	w := call(ctx, b, key)
	if w.Body.String() != first.Body.String() || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("after the cut B answered %d %q, want the replay of %q", w.Code, w.Body, first.Body)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
}

// ManyWaiters checks that a thousand duplicates waiting for one running
// request on the same instance, over a pool of four connections, do not
// starve its renewals: the holder keeps its lease through four leases and
// executes once; the duplicates over the WithMaxWaiters bound get 409
// without waiting for the holder (before it answers), and those waiting get
// the replay.
func ManyWaiters(t *testing.T, at StoreAt, target string, lease time.Duration) {
	t.Helper()
	const waiters = 1000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ex runCounter
	var ev eventCounts
	h := idempotency.Middleware(at(t, target, 4), idempotency.WithLease(lease), idempotency.WithHook(ev.hook),
		idempotency.WithWaitForResult(time.Minute))(ex.holding(4 * lease))
	key := testenv.RandomName("waiters-")
	first := make(chan *httptest.ResponseRecorder, 1)
	base := time.Now()
	var heldDone atomic.Int64 // when the holder answered, in nanoseconds from base (monotonic: a step of the wall clock must not hide a late conflict)
	go func() {
		w := call(ctx, h, key)
		heldDone.Store(max(int64(time.Since(base)), 1))
		first <- w
	}()
	testenv.Eventually(t, "the holder runs", func() bool { return ex.of(key) == 1 })
	started := time.Now()
	var conflicts, replays, lateConflicts atomic.Int64
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := call(ctx, h, key)
			switch {
			case w.Code == http.StatusConflict:
				conflicts.Add(1)
				if done := heldDone.Load(); done != 0 && done < int64(time.Since(base)) {
					lateConflicts.Add(1)
				}
			case w.Code == http.StatusCreated && w.Header().Get(idempotency.HeaderReplayed) == "true":
				replays.Add(1)
			default:
				t.Errorf("a waiter got %d %q", w.Code, w.Body)
			}
		}()
	}
	wg.Wait()
	held := <-first
	if held.Code != http.StatusCreated {
		t.Fatalf("the holder answered %d %q (events %v)", held.Code, held.Body, &ev)
	}
	if n := ex.of(key); n != 1 {
		t.Errorf("executions = %d, want 1", n)
	}
	if n := ev.count(idempotency.OutcomeLeaseLost); n != 0 || ex.cancelled.Load() != 0 {
		t.Errorf("the holder lost its lease under %d waiters: events %v", waiters, &ev)
	}
	want := int64(waiters - idempotency.DefaultMaxWaiters)
	if c, r := conflicts.Load(), replays.Load(); c != want || r != idempotency.DefaultMaxWaiters {
		t.Errorf("%d conflicts and %d replays, want %d and %d", c, r, want, idempotency.DefaultMaxWaiters)
	}
	if n := lateConflicts.Load(); n != 0 {
		t.Errorf("%d of the %d conflicts came after the holder answered: the waiters over the bound must not wait", n, want)
	}
	t.Logf("ManyWaiters: %d duplicates over a pool of 4, lease %v: 1 execution, %d replays, %d answered 409 at once, all done %v after the holder started",
		waiters, lease, replays.Load(), conflicts.Load(), time.Since(started).Round(time.Millisecond))
}
