package clock

import (
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func TestManualFiresInOrderAtTheirTimes(t *testing.T) {
	m := NewManual(t0)
	var order []time.Duration
	fired := make(chan time.Duration, 3)
	for _, d := range []time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		m.AfterFunc(d, func() { fired <- m.Now().Sub(t0) })
	}
	tm := m.NewTimer(15 * time.Millisecond)
	m.Advance(25 * time.Millisecond)
	for range 2 {
		order = append(order, <-fired)
	}
	select {
	case at := <-tm.C():
		if at.Sub(t0) != 15*time.Millisecond {
			t.Errorf("timer fired at %v, want 15ms", at.Sub(t0))
		}
	default:
		t.Fatal("the 15ms timer did not fire within 25ms")
	}
	if m.Pending() != 1 {
		t.Fatalf("Pending = %d, want the 30ms one", m.Pending())
	}
	m.Advance(10 * time.Millisecond)
	order = append(order, <-fired)
	// The AfterFuncs run in goroutines of their own: each read Now after
	// Advance had moved on, so only the set of times is checked, and
	// that the clock ends where it was moved to.
	if got := m.Now().Sub(t0); got != 35*time.Millisecond {
		t.Fatalf("Now = %v, want 35ms", got)
	}
	if len(order) != 3 {
		t.Fatalf("fired %v", order)
	}
}

func TestManualStopAndReset(t *testing.T) {
	m := NewManual(t0)
	var n atomic.Int64
	tm := m.AfterFunc(time.Second, func() { n.Add(1) })
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer = false")
	}
	m.Advance(2 * time.Second)
	if tm.Stop() {
		t.Fatal("Stop of a stopped timer = true")
	}
	tm.Reset(time.Second)
	m.Advance(500 * time.Millisecond)
	if tm.Reset(time.Second) != true {
		t.Fatal("Reset of an armed timer = false")
	}
	m.Advance(900 * time.Millisecond)
	if n.Load() != 0 || m.Pending() != 1 {
		t.Fatalf("fired %d, pending %d; want the reset timer still armed", n.Load(), m.Pending())
	}
	done := make(chan struct{})
	m.AfterFunc(0, func() { close(done) })
	m.Advance(0)
	<-done
}

func TestRealClock(t *testing.T) {
	tm := Real.NewTimer(time.Millisecond)
	<-tm.C()
	done := make(chan struct{})
	Real.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	if Real.Now().IsZero() {
		t.Fatal("Real.Now is zero")
	}
}
