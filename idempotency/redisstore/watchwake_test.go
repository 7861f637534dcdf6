package redisstore_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestWaiterWokenWhenTheHolderAfterAReleaseCompletes: two duplicates wait
// for a request that fails (a 5xx, so its claim is released). Woken by the
// release, one of them claims the key and runs; the other finds it in
// progress again and must be woken when that run completes (a Watcher's
// channel is closed once the key was completed after Watch returned), not
// by its fallback poll a second later. The handler runs twice in all.
func TestWaiterWokenWhenTheHolderAfterAReleaseCompletes(t *testing.T) {
	s, _, _ := newStore(t)
	var (
		runs     atomic.Int64
		fail     = make(chan struct{})
		started  = make(chan struct{})
		mu       sync.Mutex
		finished time.Time
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-fail
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
		mu.Lock()
		finished = time.Now()
		mu.Unlock()
	})
	mw := idempotency.Middleware(s, idempotency.WithWaitForResult(10*time.Second))(h)
	serve := func() (*httptest.ResponseRecorder, time.Time) {
		req := httptest.NewRequest(http.MethodPost, "/debit", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idempotency.HeaderIdempotencyKey, "k")
		rec := httptest.NewRecorder()
		mw.ServeHTTP(rec, req)
		return rec, time.Now()
	}
	go serve()
	<-started
	type result struct {
		status   int
		replayed bool
		at       time.Time
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			rec, at := serve()
			results <- result{rec.Code, rec.Header().Get(idempotency.HeaderReplayed) == "true", at}
		}()
	}
	time.Sleep(300 * time.Millisecond) // both wait
	close(fail)
	var replay result
	for range 2 {
		r := <-results
		if r.status != http.StatusCreated {
			t.Fatalf("a duplicate got %d, want 201", r.status)
		}
		if r.replayed {
			replay = r
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2 (the failed run, then one of the duplicates)", n)
	}
	if replay.at.IsZero() {
		t.Fatal("neither duplicate replayed")
	}
	mu.Lock()
	late := replay.at.Sub(finished)
	mu.Unlock()
	if late > 500*time.Millisecond {
		t.Errorf("the waiting duplicate replayed %v after the run it waited for completed: it was not woken", late)
	}
}
