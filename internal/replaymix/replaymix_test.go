package replaymix

import (
	"sync"
	"testing"
)

// observe counts n claims of which replays answered a completed entry,
// the replays first.
func observe(m *Mix, n, replays int) {
	for i := range n {
		m.Observe(i < replays)
	}
}

func TestAdaptiveFollowsTheShareOfReplays(t *testing.T) {
	m := New(Adaptive, 0.6, 0.5) // enter at 38 of 64, leave under 32
	if m.ReadFirst() {
		t.Fatal("a new Mix reads first; want the claim path until a window says otherwise")
	}
	observe(m, Window-1, Window-1)
	if m.ReadFirst() {
		t.Fatal("the path changed before the window was complete")
	}
	m.Observe(true)
	if !m.ReadFirst() {
		t.Fatal("a window of replays only did not turn reading first on")
	}
	steps := []struct {
		replays int
		want    bool
	}{
		{37, true},  // between the thresholds: kept on
		{31, false}, // under leave: off
		{37, false}, // between: kept off
		{38, true},  // at enter: on
		{32, true},  // at leave: kept on
		{0, false},
	}
	for i, s := range steps {
		observe(m, Window, s.replays)
		if got := m.ReadFirst(); got != s.want {
			t.Fatalf("step %d (%d replays of %d): ReadFirst = %v, want %v", i, s.replays, Window, got, s.want)
		}
	}
	if c := m.counts.Load(); c != 0 {
		t.Fatalf("counts after whole windows = %#x, want 0", c)
	}
}

func TestFixedModesIgnoreTheMix(t *testing.T) {
	always, never := New(Always, 0.6, 0.5), New(Never, 0.6, 0.5)
	for _, m := range []*Mix{always, never} {
		observe(m, 3*Window, 0)
		observe(m, 3*Window, 3*Window)
	}
	if !always.ReadFirst() || never.ReadFirst() {
		t.Fatalf("Always reads first %v, Never %v; want true, false", always.ReadFirst(), never.ReadFirst())
	}
}

func TestNewClampsTheShares(t *testing.T) {
	for _, c := range []struct {
		enter, leave         float64
		wantEnter, wantLeave uint64
	}{
		{0.6, 0.5, 38, 32},
		{1.5, -1, Window, 0},
		{0.25, 0.75, 16, 16}, // leave above enter: leave = enter
	} {
		m := New(Adaptive, c.enter, c.leave)
		if m.enter != c.wantEnter || m.leave != c.wantLeave {
			t.Errorf("New(%v, %v): enter %d leave %d, want %d %d", c.enter, c.leave, m.enter, m.leave, c.wantEnter, c.wantLeave)
		}
	}
}

// TestConcurrentObservers runs many goroutines through many windows: every
// complete window is decided (fewer than a window's claims are left
// counted), and the decisions agree with what was observed.
func TestConcurrentObservers(t *testing.T) {
	const goroutines, each = 8, 50 * Window
	for _, replay := range []bool{true, false} {
		m := New(Adaptive, 0.6, 0.5)
		if !replay {
			observe(m, Window, Window) // start on reading first
		}
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range each {
					m.Observe(replay)
				}
			})
		}
		wg.Wait()
		if got := m.ReadFirst(); got != replay {
			t.Errorf("after only replay=%v claims: ReadFirst = %v", replay, got)
		}
		if c := m.counts.Load(); c>>32 >= Window {
			t.Errorf("replay=%v: %d claims left counted after the last one, want fewer than a window (%d)", replay, c>>32, Window)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	m := New(Adaptive, 0.6, 0.5)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Observe(i%3 == 0)
			i++
		}
	})
}
