package memstore

import (
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// TestReadOffset: a store on the default clock reads its offsets as the
// time since its base, which must be what offset gives for the
// MonotonicNow readings around it; a store given a clock reads that clock.
func TestReadOffset(t *testing.T) {
	s := New(WithCleanupInterval(0))
	defer s.Close()
	if !s.monotonic {
		t.Fatal("a store without WithClock does not read the monotonic clock's fast path")
	}
	sh := &s.shards[3]
	for range 100 {
		before, ok1 := sh.offset(clock.MonotonicNow())
		got, ok := s.readOffset(sh)
		after, ok2 := sh.offset(clock.MonotonicNow())
		if !ok || !ok1 || !ok2 || got < before || got > after {
			t.Fatalf("readOffset = %d (%v), outside the readings %d and %d around it", got, ok, before, after)
		}
	}

	f, clk := newFake(t)
	if f.monotonic {
		t.Fatal("a store given a clock takes the default clock's fast path")
	}
	clk.Advance(90 * time.Second)
	if got, ok := f.readOffset(&f.shards[5]); !ok || got != int64(90*time.Second) {
		t.Fatalf("readOffset on a fake clock = %d, %v; want %d", got, ok, int64(90*time.Second))
	}
}
