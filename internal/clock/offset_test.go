package clock

import (
	"math"
	"testing"
	"time"
)

// TestOffsets: Later and Between count as Add and Sub do, and give the
// largest or the least value where an int64 does not reach.
func TestOffsets(t *testing.T) {
	for _, c := range []struct {
		at   int64
		d    time.Duration
		want int64
	}{
		{5, 3, 8},
		{5, -7, -2},
		{math.MaxInt64 - 1, 2, math.MaxInt64},
		{math.MinInt64 + 1, -2, math.MinInt64},
		{1, math.MaxInt64, math.MaxInt64},
		{-1, math.MinInt64, math.MinInt64},
	} {
		if got := Later(c.at, c.d); got != c.want {
			t.Errorf("Later(%d, %d) = %d, want %d", c.at, c.d, got, c.want)
		}
	}
	for _, c := range []struct {
		a, b int64
		want time.Duration
	}{
		{3, 8, 5},
		{8, 3, -5},
		{math.MinInt64, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, math.MinInt64, math.MinInt64},
	} {
		if got := Between(c.a, c.b); got != c.want {
			t.Errorf("Between(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	base := NewManual(time.Unix(0, 0))
	base.Advance(time.Second)
	if got := Since(base, time.Unix(0, 0)); got != time.Second {
		t.Errorf("Since on a manual clock = %v, want 1s", got)
	}
	if got := Since(Monotonic, MonotonicNow()); got < 0 {
		t.Errorf("Since(Monotonic) = %v, want at least 0", got)
	}
}
