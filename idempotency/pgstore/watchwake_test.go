package pgstore_test

import (
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestWaiterWhoseListenerFailsPollsAtOnce: behind PgBouncer in transaction
// mode without WithListenConfig the Store does not listen, and its waiters
// poll (WithListenConfig's doc), once a second at most (WithWaitForResult's
// doc). A duplicate that arrives while the first request runs must then
// replay within about a second of the first request's completion; it must
// not be held for ReadyWait (2 s) by a LISTEN connection that failed at
// once.
func TestWaiterWhoseListenerFailsPollsAtOnce(t *testing.T) {
	tg := pgTarget{url: testenv.PgBouncerURL(t), mode: pgx.QueryExecModeExec}
	s := newStore(t, tg.newPool(t), pgstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	started := make(chan struct{})
	var once sync.Once
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	})
	srv := instance(t, s, h, idempotency.WithWaitForResult(5*time.Second))
	ctx := ctxT(t)
	first := make(chan reply, 1)
	go func() { first <- post(ctx, srv.URL, "k", `{}`) }()
	<-started
	begin := time.Now()
	dup := post(ctx, srv.URL, "k", `{}`)
	took := time.Since(begin)
	if r := <-first; r.Err != nil || r.Status != http.StatusCreated {
		t.Fatalf("first = %d, %v", r.Status, r.Err)
	}
	if dup.Err != nil || dup.Status != http.StatusCreated || !dup.Replayed {
		t.Fatalf("duplicate = %d (replayed %v), %v; want a 201 replay", dup.Status, dup.Replayed, dup.Err)
	}
	// The first request completes about 100 ms after the duplicate came;
	// the fallback poll is once a second.
	if took > 1500*time.Millisecond {
		t.Errorf("the duplicate replayed after %v; the first request completed after about 100 ms and waiters poll once a second", took)
	}
}

// TestWatchOfAReleasedKeyWakesOnTheNextCompletion: a Watcher's channel is
// closed once the key was completed or released after Watch returned
// (idempotency.Watcher). A waiter watches again when woken, and when the
// wake-up was a release the key is free at that moment: the completion of
// the next claim, which another request makes before the waiter looks
// again, must still wake it (or the Watch must wake it at once, a
// spurious wake-up that makes it look again). It waited for its fallback
// poll, a second later.
func TestWatchOfAReleasedKeyWakesOnTheNextCompletion(t *testing.T) {
	s := newStore(t, nil)
	ctx := ctxT(t)
	k := key("r")
	first, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Minute)
	if err != nil || !first.Acquired {
		t.Fatalf("Claim = %+v, %v", first, err)
	}
	if err := s.Release(ctx, k, first.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	settled, stop, err := s.Watch(ctx, k)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stop()
	next, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Minute)
	if err != nil || !next.Acquired {
		t.Fatalf("second Claim = %+v, %v", next, err)
	}
	if err := s.Complete(ctx, k, next.Token, idempotency.Response{Status: http.StatusCreated}, time.Minute); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	select {
	case <-settled:
	case <-time.After(500 * time.Millisecond):
		t.Fatal("the key was claimed and completed after Watch returned, and the watch was not woken")
	}
}
