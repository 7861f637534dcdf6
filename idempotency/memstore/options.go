package memstore

import "time"

// DefaultCleanupInterval is how often the background sweep removes expired
// entries when WithCleanupInterval is not given.
const DefaultCleanupInterval = time.Minute

// Option configures a Store built by New. Options apply in order; a nil
// Option is ignored.
type Option func(*config)

type config struct {
	now      func() time.Time
	interval time.Duration
}

// WithClock makes the store read time from now instead of time.Now, for
// tests that control time. A nil now keeps time.Now. The function must be
// safe for concurrent use.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithCleanupInterval sets how often the background sweep removes expired
// entries (default DefaultCleanupInterval). Zero or a negative interval
// starts no goroutine: expired entries are then only dropped when they are
// touched, so a store whose keys are never seen again grows without bound.
func WithCleanupInterval(d time.Duration) Option {
	return func(c *config) { c.interval = d }
}
