package pgstore_test

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// listenersWithAConnection counts the goroutines that run a Store's LISTEN
// connection and are still connecting, listening or closing the
// connection. A listener whose goroutine is done with it but has yet to
// leave listen (it told Close it returned) is not counted.
func listenersWithAConnection() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	busy := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "pgstore.(*watcher).listen(") &&
			(strings.Contains(g, "pgstore.(*watcher).receive(") || strings.Contains(g, "pgstore.(*watcher).connect(") || strings.Contains(g, "pgx.(*Conn).Close(")) {
			busy++
		}
	}
	return busy
}

// TestCloseConcurrentWaitsForTheListener checks Close's promise that the
// LISTEN connection's goroutine has returned when Close does, for every
// Close: one called while another is still ending the listener must not
// return first.
func TestCloseConcurrentWaitsForTheListener(t *testing.T) {
	pool := newPool(t)
	for round := range 10 {
		s := newStore(t, pool)
		ctx := ctxT(t)
		k := key("concurrent-close")
		if r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
			t.Fatalf("Claim: %+v %v", r, err)
		}
		_, stop, err := s.Watch(ctx, k)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		start := make(chan struct{})
		left := make(chan int, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				<-start
				_ = s.Close()
				left <- listenersWithAConnection()
			})
		}
		close(start)
		wg.Wait()
		stop()
		for range 2 {
			if n := <-left; n > 0 {
				t.Fatalf("round %d: a Close returned while %d listener goroutines still held or opened their connection", round, n)
			}
		}
	}
}
