package pgstore_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// listenersWithAConnection counts the goroutines that run a Store's LISTEN
// connection and are still connecting, listening or closing the
// connection. A listener whose goroutine is done with it but has yet to
// leave listen (it told Close it returned) is not counted.
func listenersWithAConnection() int {
	busy := 0
	for _, g := range listenerStacks() {
		if strings.Contains(g, "pgstore.(*watcher).receive(") || strings.Contains(g, "pgstore.(*watcher).connect(") || strings.Contains(g, "pgx.(*Conn).Close(") {
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

// TestCloseWakesAWatchWaitingForTheListener checks that a request whose
// Watch waits for the LISTEN connection to start (its connection attempt
// is slow) is let go by Close, as the requests waiting are: no listener
// will ever listen for it, so it must not wait out watchset.ReadyWait.
func TestCloseWakesAWatchWaitingForTheListener(t *testing.T) {
	// A server that accepts connections and never answers: the listener's
	// connection attempt hangs until Close cuts it short.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		for {
			select {
			case c := <-accepted:
				_ = c.Close()
			default:
				return
			}
		}
	})
	pool := newPool(t)
	cfg := pool.Config().ConnConfig.Copy()
	cfg.Host, cfg.Port = "127.0.0.1", uint16(ln.Addr().(*net.TCPAddr).Port)
	cfg.Fallbacks = nil
	s := newStore(t, pool, pgstore.WithListenConfig(cfg))
	ctx := ctxT(t)
	k := key("close-while-connecting")
	if r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
		t.Fatalf("Claim: %+v %v", r, err)
	}
	type watched struct {
		settled <-chan struct{}
		stop    func()
		err     error
	}
	done := make(chan watched, 1)
	go func() {
		settled, stop, err := s.Watch(context.Background(), k)
		done <- watched{settled, stop, err}
	}()
	var c net.Conn
	select {
	case c = <-accepted: // the listener is connecting
		accepted <- c
	case <-time.After(5 * time.Second):
		t.Fatal("the listener never tried to connect")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed := time.Now()
	select {
	case w := <-done:
		if w.err != nil {
			return // it polls
		}
		defer w.stop()
		select {
		case <-w.settled:
		default:
			t.Error("Watch returned after Close with a channel that was not closed")
		}
		if d := time.Since(closed); d > 500*time.Millisecond {
			t.Errorf("Watch returned %v after Close, want at once", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch still waits 5 s after Close")
	}
}
