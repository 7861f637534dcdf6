// Package clock is the seam through which saferetry reads time and waits:
// the real clock, and Manual, a clock for tests that moves only when told
// to, so that lease and retry schedules run on fake time.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers. Real is the clock of the time
// package; Manual is one for tests. Implementations are safe for concurrent
// use.
type Clock interface {
	Now() time.Time
	// NewTimer is time.NewTimer.
	NewTimer(d time.Duration) Timer
	// AfterFunc is time.AfterFunc: f runs in a goroutine of its own.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer that saferetry uses. C is nil for a
// timer made by AfterFunc.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the clock of the time package.
var Real Clock = realClock{}

// Monotonic is Real with a Now that reads the monotonic clock alone (see
// MonotonicNow), for code whose times are only compared, subtracted and
// waited for, never shown or set against a wall-clock time from elsewhere
// (an HTTP date, say).
var Monotonic Clock = monotonicClock{}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer            { return realTimer{time.NewTimer(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

// epoch is when the process started, as MonotonicNow counts from it.
var epoch = time.Now()

// MonotonicNow returns the current time as the monotonic clock tells it:
// the process start's wall time plus the monotonic time elapsed since. It
// makes one clock read where time.Now makes two (the wall clock and the
// monotonic clock; each one is a virtualised clock read on a VM, some 20
// ns), and comparing, subtracting or adding its values gives what those of
// time.Now give, since these use the monotonic reading. Its wall reading
// does not follow a step of the system's wall clock (an NTP correction, a
// suspended VM): it is for measuring and scheduling, never for a time shown
// to anyone. Inside a testing/synctest bubble its wall reading means
// nothing; its readings still compare and subtract as the bubble's time.
func MonotonicNow() time.Time { return epoch.Add(time.Since(epoch)) }

type monotonicClock struct{ realClock }

func (monotonicClock) Now() time.Time { return MonotonicNow() }

// realTimer holds one pointer, so that it fits an interface without an
// allocation of its own.
type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// Manual is a Clock whose time moves only when Advance is called; timers
// fire, in the order they are due, as Advance passes their time. Create it
// with NewManual. It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	seq    int
}

// NewManual returns a Manual clock that reads start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now implements Clock.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer implements Clock.
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc implements Clock: f runs in a goroutine of its own when
// Advance passes the timer's time.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{m: m, f: f}
	t.Reset(d)
	return t
}

// Advance moves the time forward by d, firing every timer due on the way,
// in order, each at its own time.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	end := m.now.Add(d)
	for {
		t := m.nextDue(end)
		if t == nil {
			break
		}
		m.now = t.at
		t.armed = false
		m.remove(t)
		if t.f != nil {
			go t.f()
		} else {
			select {
			case t.c <- m.now:
			default:
			}
		}
	}
	m.now = end
	m.mu.Unlock()
}

// Pending returns how many timers are armed, so that a test can wait
// until the code under test armed the one it expects.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// nextDue returns the earliest armed timer due at or before end, or nil.
// The lock must be held.
func (m *Manual) nextDue(end time.Time) *manualTimer {
	sort.SliceStable(m.timers, func(i, j int) bool {
		a, b := m.timers[i], m.timers[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.seq < b.seq
	})
	if len(m.timers) == 0 || m.timers[0].at.After(end) {
		return nil
	}
	return m.timers[0]
}

func (m *Manual) remove(t *manualTimer) {
	for i, x := range m.timers {
		if x == t {
			m.timers = append(m.timers[:i], m.timers[i+1:]...)
			return
		}
	}
}

type manualTimer struct {
	m     *Manual
	c     chan time.Time
	f     func()
	at    time.Time
	seq   int
	armed bool
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	was := t.armed
	if was {
		t.armed = false
		t.m.remove(t)
	}
	return was
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	was := t.armed
	if was {
		t.m.remove(t)
	}
	t.m.seq++
	t.at, t.seq, t.armed = t.m.now.Add(max(d, 0)), t.m.seq, true
	t.m.timers = append(t.m.timers, t)
	if d <= 0 {
		// Due now: fire at the next Advance, even Advance(0).
		t.at = t.m.now
	}
	return was
}
