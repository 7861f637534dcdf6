package clock

import "time"

// CeilUnits returns d in whole units, rounded up (a positive d shorter
// than a unit is one), without the overflow of (d+unit-1)/unit: a d near
// math.MaxInt64, as WithTTL(math.MaxInt64) gives to mean "for ever", must
// not wrap to a negative count. A d of zero or less is d/unit. unit must be
// positive.
func CeilUnits(d, unit time.Duration) int64 {
	n := d / unit
	if d > 0 && d%unit != 0 {
		n++
	}
	return int64(n)
}
