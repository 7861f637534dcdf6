package clock

import (
	"math"
	"time"
)

// Offsets are times kept as int64 nanoseconds from a base reading of a
// clock, 8 bytes where a time.Time takes 24, and compared, added and
// subtracted as integers, where a time.Time's monotonic reading makes each
// of those a few branches.

// Since returns the time from base to c's reading now, as c.Now().Sub(base)
// gives it: an offset from base. Monotonic is read as the time since base
// without the time.Time in between (both count the monotonic clock when
// base has a monotonic reading, as one of Monotonic's has).
func Since(c Clock, base time.Time) time.Duration {
	if c == Monotonic {
		return time.Since(base)
	}
	return c.Now().Sub(base)
}

// Between returns the time from offset a to offset b, as Sub would: the
// largest or the least Duration where an int64 does not count it.
func Between(a, b int64) time.Duration {
	d := b - a
	switch {
	case b > a && d < 0:
		return math.MaxInt64
	case b < a && d > 0:
		return math.MinInt64
	}
	return time.Duration(d)
}

// Later returns the offset d after at, as Add would: the largest or the
// least offset when that is further off than an int64 counts (a ttl of
// math.MaxInt64, meaning for ever).
func Later(at int64, d time.Duration) int64 {
	t := at + int64(d)
	switch {
	case d > 0 && t < at:
		return math.MaxInt64
	case d < 0 && t > at:
		return math.MinInt64
	}
	return t
}
