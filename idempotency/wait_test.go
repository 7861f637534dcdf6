package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestWaitersBounded checks that at most WithMaxWaiters duplicates wait for
// a running request; the others get 409 at once, and the waiters get the
// replay once it completes.
func TestWaitersBounded(t *testing.T) {
	const waiters, duplicates = 3, 10
	app, started, release := blockFirst()
	h := idempotency.Middleware(newStore(t), idempotency.WithWaitForResult(testenv.Patience),
		idempotency.WithMaxWaiters(waiters))(app)
	first := make(chan string, 1)
	go func() { first <- post(h, "k", `{}`).Body.String() }()
	<-started
	var conflicts, replays atomic.Int64
	var wg sync.WaitGroup
	for range duplicates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := post(h, "k", `{}`)
			switch {
			case w.Code == http.StatusConflict:
				conflicts.Add(1)
			case w.Header().Get(idempotency.HeaderReplayed) == "true":
				replays.Add(1)
			default:
				t.Errorf("duplicate answered %d %s", w.Code, w.Body)
			}
		}()
	}
	testenv.Eventually(t, "the duplicates over the bound get 409", func() bool {
		return conflicts.Load() == duplicates-waiters
	})
	close(release)
	wg.Wait()
	if c, r := conflicts.Load(), replays.Load(); c != duplicates-waiters || r != waiters {
		t.Fatalf("%d conflicts and %d replays, want %d and %d", c, r, duplicates-waiters, waiters)
	}
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("executions = %d", n)
	}
	<-first
}

// watchingStore adds a Watcher to a Store: Complete and Release fire it.
type watchingStore struct {
	idempotency.Store
	mu      sync.Mutex
	waiting map[idempotency.Key][]chan struct{}
	byKey   map[string]int // Watch calls by key
	watches atomic.Int64
}

func (s *watchingStore) Watch(_ context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	s.watches.Add(1)
	ch := make(chan struct{})
	s.mu.Lock()
	if s.waiting == nil {
		s.waiting = map[idempotency.Key][]chan struct{}{}
		s.byKey = map[string]int{}
	}
	s.waiting[k] = append(s.waiting[k], ch)
	s.byKey[k.Key]++
	s.mu.Unlock()
	return ch, func() {}, nil
}

func (s *watchingStore) watchesOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

func (s *watchingStore) fire(k idempotency.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.waiting[k] {
		close(ch)
	}
	delete(s.waiting, k)
}

func (s *watchingStore) Complete(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
	err := s.Store.Complete(ctx, k, tok, resp, ttl)
	s.fire(k)
	return err
}

func (s *watchingStore) Release(ctx context.Context, k idempotency.Key, tok int64) error {
	err := s.Store.Release(ctx, k, tok)
	s.fire(k)
	return err
}

// TestWaitWokenByWatcher checks that a waiter on a store with a Watcher is
// woken by the store when the first request completes, instead of polling:
// it claims at most three times (before, right after the watch began, after
// the wake-up), and answers well before the one-second fallback poll.
func TestWaitWokenByWatcher(t *testing.T) {
	var claims atomic.Int64
	inner := &faultyStore{Store: newStore(t)}
	st := &watchingStore{Store: inner}
	app, started, release := blockFirst() // the first is held until the waiter watches
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(testenv.Patience))(app)
	first := make(chan string, 1)
	go func() { first <- post(h, "k", `{}`).Body.String() }()
	<-started
	inner.claim = func(ctx context.Context, k idempotency.Key, fp string, l, ttl time.Duration) (idempotency.ClaimResult, error) {
		claims.Add(1)
		return inner.Store.Claim(ctx, k, fp, l, ttl)
	}
	waiter := make(chan *httptest.ResponseRecorder, 1)
	go func() { waiter <- post(h, "k", `{}`) }()
	testenv.Eventually(t, "the waiter watches the key", func() bool { return st.watchesOf("k") > 0 })
	begin := time.Now()
	close(release)
	w := <-waiter
	took := time.Since(begin)
	if body := <-first; w.Body.String() != body || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("waiter got %d %s, want the replay of %s", w.Code, w.Body, body)
	}
	if n := claims.Load(); n > 3 {
		t.Fatalf("the waiter claimed %d times; a woken waiter needs 3 at most", n)
	}
	if took >= 900*time.Millisecond {
		t.Fatalf("the waiter answered after %v: not woken, it waited for the fallback poll", took)
	}
	if st.watches.Load() == 0 {
		t.Fatal("the Watcher was never used")
	}
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
		app, started, release := blockEach()
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
		app, started, release := blockEach()
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

// slowWatcher is a Store whose Watch blocks until its context ends (a
// listener that never comes up), recording the context's deadline.
type slowWatcher struct {
	idempotency.Store
	deadline chan time.Time
}

func (s *slowWatcher) Watch(ctx context.Context, _ idempotency.Key) (<-chan struct{}, func(), error) {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Time{}
	}
	s.deadline <- d
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

// TestWatchBoundedByTheWait checks that setting up a watch counts against
// WithWaitForResult: the Watcher's context ends with the wait, so a store
// slow to watch cannot hold a waiter past its bound.
func TestWatchBoundedByTheWait(t *testing.T) {
	const wait = 200 * time.Millisecond
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	app := &counter{before: func(http.ResponseWriter, *http.Request) int {
		close(started)
		<-release
		return 0
	}}
	st := &slowWatcher{Store: newStore(t), deadline: make(chan time.Time, 1)}
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(wait))(app)
	go post(h, "k", `{}`)
	<-started
	w := post(h, "k", `{}`)
	end := time.Now()
	if w.Code != http.StatusConflict {
		t.Fatalf("duplicate answered %d, want 409 once the wait is over", w.Code)
	}
	// The waiter answered once its wait was over; Watch's context had
	// ended by then.
	if d := <-st.deadline; d.IsZero() || d.After(end) {
		t.Fatalf("Watch's context deadline %v, want one within the wait (answered at %v)", d, end)
	}
}

// TestWaiterThatWinsGivesBackItsSlot checks that a waiter that ends up
// claiming the key (the first request released it) gives back its waiting
// slot while its handler runs: with one slot, a duplicate of another key
// can then wait, rather than get 409 at once.
func TestWaiterThatWinsGivesBackItsSlot(t *testing.T) {
	aIn, aOut := make(chan struct{}), make(chan struct{})
	winIn, winOut := make(chan struct{}), make(chan struct{})
	bIn, bOut := make(chan struct{}), make(chan struct{})
	var aRuns atomic.Int64
	app := &counter{before: func(_ http.ResponseWriter, r *http.Request) int {
		k, _ := idempotency.ScopedKeyFromContext(r.Context())
		switch {
		case k.Key == "a" && aRuns.Add(1) == 1: // fails, so a is released
			close(aIn)
			<-aOut
			return http.StatusServiceUnavailable
		case k.Key == "a": // the waiter that won a
			close(winIn)
			<-winOut
		case k.Key == "b":
			close(bIn)
			<-bOut
		}
		return 0
	}}
	st := &watchingStore{Store: newStore(t)}
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(testenv.Patience), idempotency.WithMaxWaiters(1))(app)
	go post(h, "a", `{}`)
	<-aIn
	won := make(chan int, 1)
	go func() { won <- post(h, "a", `{}`).Code }() // waits on a, in the one slot
	testenv.Eventually(t, "the duplicate of a waits", func() bool { return st.watchesOf("a") > 0 })
	close(aOut) // a is released: the waiter claims it and runs
	<-winIn
	go post(h, "b", `{}`)
	<-bIn
	dup := make(chan int, 1)
	go func() { dup <- post(h, "b", `{}`).Code }()
	testenv.Eventually(t, "the duplicate of b waits in the slot the winner gave back", func() bool {
		select {
		case code := <-dup:
			t.Fatalf("the duplicate of b answered %d at once: the slot was still taken", code)
		default:
		}
		return st.watchesOf("b") > 0
	})
	close(bOut)
	if code := <-dup; code != http.StatusCreated {
		t.Fatalf("the duplicate of b answered %d, want b's 201 replayed", code)
	}
	close(winOut)
	if code := <-won; code != http.StatusCreated {
		t.Fatalf("the waiter that won answered %d", code)
	}
}
