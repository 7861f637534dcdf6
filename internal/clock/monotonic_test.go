package clock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/benchratio"
	"github.com/saferetry/saferetry/internal/clock"
)

// TestMonotonicNow checks that MonotonicNow tells the time as time.Now
// does: between two readings of time.Now when compared, with a monotonic
// reading, never going back, and with a wall reading close to time.Now's.
func TestMonotonicNow(t *testing.T) {
	prev := clock.MonotonicNow()
	for i := range 1000 {
		before := time.Now()
		got := clock.MonotonicNow()
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Fatalf("reading %d: %v is not between %v and %v", i, got, before, after)
		}
		if got.Before(prev) {
			t.Fatalf("reading %d: %v went back from %v", i, got, prev)
		}
		prev = got
		if i%100 == 0 {
			// Sleeping moves the monotonic clock as much as the wall clock.
			time.Sleep(time.Millisecond)
		}
	}
	if !strings.Contains(prev.String(), " m=+") {
		t.Errorf("%v has no monotonic reading", prev)
	}
	// A sanity check: it fails only if the system's wall clock was stepped
	// by more than a second while this test binary ran.
	if d := prev.Round(0).Sub(time.Now().Round(0)).Abs(); d > time.Second {
		t.Errorf("the wall reading is %v away from time.Now's", d)
	}
	if got := clock.Monotonic.Now(); got.Before(prev) {
		t.Errorf("clock.Monotonic.Now() = %v, before an earlier MonotonicNow %v", got, prev)
	}
}

// BenchmarkMonotonicNow is MonotonicNow against time.Now, alternately (see
// internal/benchratio).
func BenchmarkMonotonicNow(b *testing.B) {
	var sink time.Time
	benchratio.Run(b, func(n int) {
		for range n {
			sink = clock.MonotonicNow()
		}
	}, func(n int) {
		for range n {
			sink = time.Now()
		}
	})
	_ = sink
}
