package clock_test

import (
	"math"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

func TestCeilUnits(t *testing.T) {
	for _, tc := range []struct {
		d, unit time.Duration
		want    int64
	}{
		{0, time.Millisecond, 0},
		{1, time.Millisecond, 1},
		{time.Millisecond, time.Millisecond, 1},
		{time.Millisecond + 1, time.Millisecond, 2},
		{1500 * time.Millisecond, time.Second, 2},
		{-1500 * time.Millisecond, time.Second, -1},
		{math.MaxInt64, time.Microsecond, math.MaxInt64/1000 + 1},
		{math.MaxInt64, time.Millisecond, math.MaxInt64/1000000 + 1},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 999, time.Microsecond, math.MaxInt64 / 1000},
	} {
		if got := clock.CeilUnits(tc.d, tc.unit); got != tc.want {
			t.Errorf("CeilUnits(%d, %v) = %d, want %d", int64(tc.d), tc.unit, got, tc.want)
		}
	}
}
