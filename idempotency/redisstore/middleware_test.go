package redisstore_test

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

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// answer is what one request through the middleware got back.
type answer = testenv.Reply

// post sends one protected request with key to url.
func post(ctx context.Context, url, key, body string) answer {
	return testenv.Post(ctx, nil, url+"/debit", key, body)
}

// countingHandler answers 201 with a body naming the instance and counts its
// runs.
func countingHandler(name string, runs *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"instance":%q,"run":%d}`, name, n)
	})
}

// TestCrashDeadInstanceTakeover kills instance A in the middle of its handler
// for real: its Redis client is closed (no renewal reaches Redis any more),
// its server drops the client's connection and its request context is
// cancelled. The retry on instance B answers 409 while A's lease lives, then
// takes the key over; the token A held is refused when a late completion
// arrives with it.
func TestCrashDeadInstanceTakeover(t *testing.T) {
	const lease = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdbB := newClient(t)
	prefix := newPrefix(t, rdbB)
	storeB := redisstore.New(rdbB, redisstore.WithPrefix(prefix))
	rdbA := redis.NewClient(redisOptions(t))
	t.Cleanup(func() { _ = rdbA.Close() }) // closed mid-test already unless a check failed first
	storeA := redisstore.New(rdbA, redisstore.WithPrefix(prefix))

	type claim struct {
		key   idempotency.Key
		token int64
	}
	enteredA := make(chan claim, 1)
	wake := make(chan struct{})
	handlerA := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := idempotency.ScopedKeyFromContext(r.Context())
		tok, _ := idempotency.TokenFromContext(r.Context())
		enteredA <- claim{k, tok}
		<-wake // the process is gone; nothing it does from here reaches anyone
		w.WriteHeader(http.StatusCreated)
	})
	srvA := httptest.NewServer(idempotency.Middleware(storeA, idempotency.WithLease(lease))(handlerA))
	// On every path, a failed check included, A's frozen handler is woken
	// and its server closed, so that no goroutine outlives the test.
	var wakeOnce sync.Once
	t.Cleanup(func() {
		wakeOnce.Do(func() { close(wake) })
		srvA.Close()
	})
	var runsB atomic.Int64
	var tookOver atomic.Bool
	hookB := idempotency.WithHook(func(ev idempotency.Event) {
		if ev.Outcome == idempotency.OutcomeNew && ev.TookOver {
			tookOver.Store(true)
		}
	})
	srvB := httptest.NewServer(idempotency.Middleware(storeB, idempotency.WithLease(lease), hookB)(countingHandler("B", &runsB)))
	t.Cleanup(srvB.Close)

	answerA := make(chan answer, 1)
	go func() { answerA <- post(ctx, srvA.URL, "crash-1", `{"amount":5}`) }()
	var a claim
	select {
	case a = <-enteredA:
	case <-ctx.Done():
		t.Fatal("the handler on A never ran")
	}

	// A dies: its connections to Redis and to its client go away.
	rdbA.Close()
	srvA.CloseClientConnections()
	if r := <-answerA; r.Err == nil {
		t.Errorf("A's client got %d %q from a dead instance", r.Status, r.Body)
	}
	// Expect a 409 first only when the lease clearly outlives the next
	// request, so a slow test machine cannot fail the test.
	e, found, err := storeB.Get(ctx, a.key)
	if err != nil || !found || e.Token != a.token {
		t.Fatalf("A's claim after its death: %+v %v %v", e, found, err)
	}
	wantConflict := e.LeaseRemaining > lease/2

	var sawConflict bool
	var final answer
	for {
		final = post(ctx, srvB.URL, "crash-1", `{"amount":5}`)
		if final.Err != nil || final.Status != http.StatusConflict {
			break
		}
		sawConflict = true
		if final.Header.Get("Retry-After") == "" {
			t.Error("409 in progress without Retry-After")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("B never took over the dead instance's key")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if final.Err != nil || final.Status != http.StatusCreated || final.Replayed {
		t.Fatalf("B's retry = %+v, want a fresh 201", final)
	}
	if wantConflict && !sawConflict {
		t.Errorf("B ran at once, want 409 while A's lease (%v left) lived", e.LeaseRemaining)
	}
	if !tookOver.Load() || runsB.Load() != 1 {
		t.Errorf("B: takeover reported %v, runs %d; want a takeover and one run", tookOver.Load(), runsB.Load())
	}

	// The dead holder's completion, arriving late (a restarted process
	// finishing its journal, say), is refused and changes nothing.
	err = storeB.Complete(ctx, a.key, a.token, idempotency.Response{Status: 201, Body: []byte("from A")}, time.Hour)
	if !errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("late Complete with A's token = %v, want ErrStaleToken", err)
	}
	if r := post(ctx, srvB.URL, "crash-1", `{"amount":5}`); r.Status != http.StatusCreated || !r.Replayed || r.Body != final.Body {
		t.Errorf("replay after the late completion = %+v, want B's %q", r, final.Body)
	}

}

// TestOutageWrongPort points the store at a port where no Redis listens: the
// middleware answers 503 with Retry-After and never runs the handler.
func TestOutageWrongPort(t *testing.T) {
	redisOptions(t) // skip rules apply: this test belongs with the Redis ones
	rdb := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second,
	})
	t.Cleanup(func() { rdb.Close() })
	var runs atomic.Int64
	srv := httptest.NewServer(idempotency.Middleware(redisstore.New(rdb))(countingHandler("down", &runs)))
	t.Cleanup(srv.Close)

	for i := range 3 {
		r := post(context.Background(), srv.URL, fmt.Sprintf("outage-%d", i), `{"amount":1}`)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		checkUnavailable(t, r)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("handler ran %d times with the store down, want 0", n)
	}
}

func checkUnavailable(t *testing.T, r answer) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" ||
		!strings.Contains(r.Body, idempotency.ProblemStoreUnavailable) {
		t.Errorf("answer with the store down = %d Retry-After %q %q, want 503 %s with Retry-After",
			r.Status, r.Header.Get("Retry-After"), r.Body, idempotency.ProblemStoreUnavailable)
	}
}

// TestOutageRecovery runs the store through a TCP proxy to the test Redis and
// stops and restarts the proxy: 503 while it is down, with the handler not
// run, and the same key executes once it is back. The real Redis keeps
// running for everyone else.
func TestOutageRecovery(t *testing.T) {
	opt := redisOptions(t)
	p := testenv.StartProxy(t, opt.Addr)
	opt.Addr = p.Addr()
	opt.MaxRetries = 2
	opt.DialerRetries = 1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	prefix := newPrefix(t, newClient(t))
	var runs atomic.Int64
	srv := httptest.NewServer(idempotency.Middleware(redisstore.New(rdb, redisstore.WithPrefix(prefix)))(countingHandler("A", &runs)))
	t.Cleanup(srv.Close)
	ctx := context.Background()

	if r := post(ctx, srv.URL, "before", `{"amount":1}`); r.Status != http.StatusCreated {
		t.Fatalf("with Redis up: %+v, want 201", r)
	}
	p.Stop()
	for range 3 {
		checkUnavailable(t, post(ctx, srv.URL, "during", `{"amount":2}`))
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (only before the outage)", n)
	}
	p.Restart(t)
	r := post(ctx, srv.URL, "during", `{"amount":2}`)
	if r.Status != http.StatusCreated || r.Replayed {
		t.Fatalf("same key once Redis is back: %+v, want a fresh 201", r)
	}
	if r := post(ctx, srv.URL, "during", `{"amount":2}`); r.Status != http.StatusCreated || !r.Replayed {
		t.Errorf("repeat after recovery: %+v, want a replayed 201", r)
	}
	if r := post(ctx, srv.URL, "before", `{"amount":1}`); r.Status != http.StatusCreated || !r.Replayed {
		t.Errorf("key from before the outage: %+v, want a replayed 201", r)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

// TestMiddlewareRoundTrips checks the cost of the middleware on Redis: two
// round trips for a first execution (claim, complete), one for a replay.
func TestMiddlewareRoundTrips(t *testing.T) {
	s, rt := countedStore(t)
	h := idempotency.Middleware(s)(benchHandler())
	for _, step := range []struct {
		name     string
		replayed string
		want     int64
	}{
		{"first execution", "", 2},
		{"replay", "true", 1},
	} {
		before := rt.n.Load()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, benchRequest("rt-1"))
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != step.replayed {
			t.Fatalf("%s: answered %d replayed=%q", step.name, w.Code, w.Header().Get(idempotency.HeaderReplayed))
		}
		if n := rt.n.Load() - before; n != step.want {
			t.Errorf("%s took %d round trips to Redis, want %d", step.name, n, step.want)
		}
	}
}
