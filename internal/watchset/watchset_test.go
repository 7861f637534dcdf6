package watchset

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestFireWakesTheKeysWaiters(t *testing.T) {
	var s Set[string]
	a1, stopA1, first, listen := s.Add("a")
	if !first || !listen {
		t.Fatalf("first Add: first=%v listen=%v, want both", first, listen)
	}
	a2, stopA2, first, listen := s.Add("a")
	if first || listen {
		t.Fatalf("second Add of a: first=%v listen=%v, want neither", first, listen)
	}
	b, stopB, first, _ := s.Add("b")
	if !first {
		t.Fatal("Add of b: not first")
	}
	defer stopA1()
	defer stopA2()
	defer stopB()
	s.Fire("a")
	if !closed(a1) || !closed(a2) {
		t.Fatal("Fire(a) did not wake a's waiters")
	}
	if closed(b) {
		t.Fatal("Fire(a) woke b's waiter")
	}
	// A waiter added after the Fire waits for the next one.
	a3, stopA3, first, _ := s.Add("a")
	defer stopA3()
	if !first || closed(a3) {
		t.Fatalf("Add after Fire: first=%v closed=%v", first, closed(a3))
	}
	s.FireAll()
	if !closed(a3) || !closed(b) {
		t.Fatal("FireAll missed a waiter")
	}
}

func TestStopAndRetire(t *testing.T) {
	var s Set[int]
	_, stop1, _, listen := s.Add(1)
	if !listen {
		t.Fatal("no listener asked for")
	}
	_, stop2, _, _ := s.Add(1)
	if s.Retire() {
		t.Fatal("Retire with waiters = true")
	}
	stop1()
	stop1() // a second call is harmless
	if s.Len() != 1 {
		t.Fatalf("Len = %d after one of two stops, want 1", s.Len())
	}
	stop2()
	if s.Len() != 0 {
		t.Fatalf("Len = %d after both stops, want 0", s.Len())
	}
	if !s.Retire() {
		t.Fatal("Retire with nobody waiting = false")
	}
	if _, stop, _, listen := s.Add(2); !listen {
		t.Fatal("Add after Retire did not ask for a new listener")
	} else {
		stop()
	}
}

func TestStopAfterFireKeepsTheNextWatch(t *testing.T) {
	var s Set[int]
	_, stopOld, _, _ := s.Add(1)
	s.Fire(1)
	next, stopNext, _, _ := s.Add(1)
	stopOld() // the old watch is gone: this must not remove the new one
	s.Fire(1)
	if !closed(next) {
		t.Fatal("the new waiter was lost when the old one stopped")
	}
	stopNext()
}

func TestConcurrent(t *testing.T) {
	var s Set[int]
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, stop, _, _ := s.Add(i % 5)
			defer stop()
			s.Fire(i % 5)
			<-ch
		}()
	}
	wg.Wait()
	if s.Len() != 0 {
		t.Fatalf("Len = %d after every waiter stopped", s.Len())
	}
}

// TestWatchStartsOneListener checks Watch's listener protocol: the first
// waiter starts the listener and waits until it listens; the first
// Listening wakes nobody, a later one (a reconnect) wakes every waiter;
// after Failed, new waiters do not wait; announce runs for a key's first
// waiter only.
func TestWatchStartsOneListener(t *testing.T) {
	var s Set[string]
	ctx := context.Background()
	started := make(chan struct{}, 4)
	listen := func() { started <- struct{}{} }
	var announced []string
	announce := func(k string) func(context.Context) error {
		return func(context.Context) error { announced = append(announced, k); return nil }
	}
	type watched struct {
		ch   <-chan struct{}
		stop func()
	}
	got := make(chan watched)
	go func() {
		ch, stop, err := s.Watch(ctx, "a", announce("a"), listen)
		if err != nil {
			t.Error(err)
		}
		got <- watched{ch, stop}
	}()
	<-started
	select {
	case <-got:
		t.Fatal("Watch returned before the listener listened")
	case <-time.After(50 * time.Millisecond):
	}
	s.Listening()
	a := <-got
	defer a.stop()
	if closed(a.ch) {
		t.Fatal("the first Listening woke the waiter")
	}
	b, stopB, err := s.Watch(ctx, "a", announce("a"), listen)
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	if len(started) != 0 || len(announced) != 1 {
		t.Fatalf("a second waiter started %d listeners and announced %v; want none and [a]", len(started), announced)
	}
	s.Listening() // a reconnect
	if !closed(a.ch) || !closed(b) {
		t.Fatal("a reconnect did not wake every waiter")
	}
	s.Failed()
	begin := time.Now()
	_, stopC, err := s.Watch(ctx, "c", nil, listen)
	if err != nil {
		t.Fatal(err)
	}
	stopC()
	if waited := time.Since(begin); waited > ReadyWait/2 {
		t.Fatalf("Watch waited %v for a listener that failed", waited)
	}
}

func TestWatchAnnounceError(t *testing.T) {
	var s Set[int]
	errNo := errors.New("no")
	if _, _, err := s.Watch(context.Background(), 1, func(context.Context) error { return errNo }, func() {}); !errors.Is(err, errNo) {
		t.Fatalf("Watch = %v, want the announce error", err)
	}
	if s.Len() != 0 {
		t.Fatalf("a failed Watch left %d keys watched", s.Len())
	}
}

// TestFailedAnnounceWakesTheWaitersThatRelyOnIt: a key's second waiter
// joins while the first one's announce is in flight, so it announces
// nothing itself. When that announce then fails (the server refused it,
// or the first waiter's client left and cut it short), nothing was asked
// to announce k, yet the second waiter was left waiting on a channel
// that no settlement would close: it, and every waiter that joined the
// key after it, slept until its fallback poll. It must be woken instead,
// to look again and watch anew, announcing k this time.
func TestFailedAnnounceWakesTheWaitersThatRelyOnIt(t *testing.T) {
	var s Set[string]
	ctx := context.Background()
	_, stopOther, _, _ := s.Add("other") // a listener runs, and listens
	defer stopOther()
	s.Listening()
	inFlight, fail := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, _, err := s.Watch(ctx, "k", func(context.Context) error {
			close(inFlight)
			<-fail
			return errors.New("refused")
		}, func() {})
		first <- err
	}()
	<-inFlight
	announced := false
	second, stop, err := s.Watch(ctx, "k", func(context.Context) error { announced = true; return nil }, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if announced {
		t.Fatal("the second waiter announced k while the first one's announce was in flight")
	}
	close(fail)
	if err := <-first; err == nil {
		t.Fatal("the first Watch did not fail")
	}
	if !closed(second) {
		t.Fatal("the first waiter's announce failed, and the second waiter, which relied on it, was not woken: nothing will announce k's settlement")
	}
}

// TestReadyMadeWithTheListener checks that the Add that asks for a new
// listener also makes the channel that says it listens, under the same
// lock: a Watch that runs between the two would otherwise read the last
// listener's channel (closed, so it would not wait) or none (and wait the
// whole ReadyWait).
func TestReadyMadeWithTheListener(t *testing.T) {
	var s Set[int]
	_, stop, _, listen := s.Add(1)
	if !listen {
		t.Fatal("the first Add did not ask for a listener")
	}
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready == nil || closed(ready) {
		t.Fatalf("after the Add that asks for a listener, ready = %v (closed %v); want a fresh channel", ready, ready != nil && closed(ready))
	}
	s.Listening()
	stop()
	if !s.Retire() {
		t.Fatal("Retire with no waiter")
	}
	_, stop, _, listen = s.Add(2)
	defer stop()
	s.mu.Lock()
	next := s.ready
	s.mu.Unlock()
	if !listen || next == ready || closed(next) {
		t.Fatal("the next listener's Add did not make a fresh ready channel")
	}
}
