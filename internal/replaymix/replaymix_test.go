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
		{38, false}, // 59.4 %, just under enter: kept off
		{39, true},  // 60.9 %: on
		{32, true},  // at leave: kept on
		{0, false},
	}
	for i, s := range steps {
		observe(m, Window, s.replays)
		if got := m.ReadFirst(); got != s.want {
			t.Fatalf("step %d (%d replays of %d): ReadFirst = %v, want %v", i, s.replays, Window, got, s.want)
		}
	}
	if c := m.state.Load() &^ readFirstBit; c != 0 {
		t.Fatalf("counts after whole windows = %#x, want 0", c)
	}
}

// TestSharesAsDocumented holds New to its contract at shares that are not
// whole counts of a window: "at least a share enter" and "fewer than a
// share leave", not the nearest count.
func TestSharesAsDocumented(t *testing.T) {
	m := New(Adaptive, 0.9, 0.8) // redisstore's
	observe(m, Window, 57)       // 89 %
	if m.ReadFirst() {
		t.Fatal("57 replays of 64 (89 %) turned reading first on at enter 0.9")
	}
	observe(m, Window, 58) // 90.6 %
	if !m.ReadFirst() {
		t.Fatal("58 replays of 64 (90.6 %) did not turn reading first on at enter 0.9")
	}
	observe(m, Window, 51) // 79.7 %
	if m.ReadFirst() {
		t.Error("51 replays of 64 (79.7 %) kept reading first on at leave 0.8")
	}
	m = New(Adaptive, 0.6, 0.5) // pgstore's
	observe(m, Window, 38)      // 59.4 %
	if m.ReadFirst() {
		t.Error("38 replays of 64 (59.4 %) turned reading first on at enter 0.6")
	}
}

// TestDecideOnTheWholeWindow: a window that racing claims made longer
// than Window is decided on the share of all its claims.
func TestDecideOnTheWholeWindow(t *testing.T) {
	m := New(Adaptive, 0.6, 0.5)
	for _, c := range []struct {
		was             bool
		claims, replays uint64
		want            bool
	}{
		{false, 100, 55, false}, // 55 %: kept off (55 of 64 would be 86 %)
		{true, 100, 45, false},  // 45 %: off (45 of 64 would be 70 %)
		{false, 80, 48, true},   // 60 %: on
		{true, 80, 40, true},    // 50 %: kept on
	} {
		if got := m.decide(c.was, c.claims, c.replays); got != c.want {
			t.Errorf("decide(%v, %d claims, %d replays) = %v, want %v", c.was, c.claims, c.replays, got, c.want)
		}
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
		wantEnter, wantLeave float64
	}{
		{0.6, 0.5, 0.6, 0.5},
		{1.5, -1, 1, 0},
		{0.25, 0.75, 0.25, 0.25}, // leave above enter: leave = enter
	} {
		m := New(Adaptive, c.enter, c.leave)
		if m.enter != c.wantEnter || m.leave != c.wantLeave {
			t.Errorf("New(%v, %v): enter %v leave %v, want %v %v", c.enter, c.leave, m.enter, m.leave, c.wantEnter, c.wantLeave)
		}
	}
}

// TestConcurrentObservers runs many goroutines through many windows: every
// complete window is decided (fewer than a window's claims are left
// counted), no claim is lost or counted twice (the claims decided and
// those left add up to those observed), and the decisions agree with what
// was observed.
func TestConcurrentObservers(t *testing.T) {
	const goroutines, each = 8, 50 * Window
	// Many rounds, since a claim lost between two atomic operations needs
	// the goroutines to interleave there.
	for round := range 40 {
		for _, replay := range []bool{true, false} {
			concurrentObservers(t, round, replay, goroutines, each)
		}
	}
}

// concurrentObservers is one round of TestConcurrentObservers: goroutines
// that each observe claims that are all replays, or none.
func concurrentObservers(t *testing.T, round int, replay bool, goroutines, each int) {
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
		t.Errorf("round %d: after only replay=%v claims: ReadFirst = %v", round, replay, got)
	}
	left := m.state.Load() >> claimShift & countMask
	if left >= Window {
		t.Errorf("round %d, replay=%v: %d claims left counted after the last one, want fewer than a window (%d)", round, replay, left, Window)
	}
	observed := uint64(goroutines * each)
	if !replay {
		observed += Window // the window that started it on reading first
	}
	if got := m.decided.Load() + left; got != observed {
		t.Errorf("round %d, replay=%v: %d claims decided and left, want every one observed (%d)", round, replay, got, observed)
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
