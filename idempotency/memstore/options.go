package memstore

import "time"

// DefaultCleanupInterval is how often the background sweep removes expired
// entries when WithCleanupInterval is not given.
const DefaultCleanupInterval = time.Minute

// Default bounds of a Store, for tests and single-instance services that set
// none. DefaultMaxBytes is what keeps the process's memory in check: 256 MiB
// hold about 400,000 typical records (some 600 bytes each with a UUID key, a
// v1 fingerprint, a Content-Type and a 100-byte JSON body), that is about 5
// new keys a second kept for the default 24 h ttl, and fit beside a service
// in a 512 MiB container. DefaultMaxEntries only binds for records smaller
// than the bytes bound allows for (about 270 bytes each), and bounds the
// maps the store sweeps. A service with more traffic sets larger bounds (and
// gives the process the memory), or uses redisstore or pgstore.
const (
	DefaultMaxEntries = 1_000_000
	DefaultMaxBytes   = 256 << 20
)

// Option configures a Store built by New. Options apply in order; a nil
// Option is ignored. An Option is a plain function: one may be given to
// several New calls, from any goroutine.
type Option func(*config)

type config struct {
	now        func() time.Time
	interval   time.Duration
	maxEntries int
	maxBytes   int64
}

// WithClock makes the store read time from now, for tests that control
// time. A nil now keeps the default, the time package's clock, of which the
// store reads the monotonic clock alone: its entries' leases and expiries
// do not move when the system's wall clock is stepped. The function must be
// safe for concurrent use. The store counts time from now's reading in New,
// up to about 292 years each way; at a reading further away every call
// that reads the clock fails with an error (a clock that reads the zero
// time.Time in New and a real date later is such a clock), and the sweep
// removes nothing.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithCleanupInterval sets how often the background sweep removes expired
// entries (default DefaultCleanupInterval). Zero or a negative interval
// starts no goroutine: expired entries are then dropped when they are
// touched, and when a Claim or Complete finds the store full (which sweeps
// the expired entries before it gives up).
func WithCleanupInterval(d time.Duration) Option {
	return func(c *config) { c.interval = d }
}

// WithMaxEntries bounds how many entries (claims in progress and completed
// records, expired ones not yet swept included) the store holds; Claim of a
// new key beyond it fails with ErrFull. n <= 0 keeps DefaultMaxEntries;
// math.MaxInt sets no bound.
func WithMaxEntries(n int) Option {
	return func(c *config) { c.maxEntries = n }
}

// WithMaxBytes bounds the heap the store's entries hold, as the store
// estimates it: the bytes of keys, fingerprints, stored headers and bodies,
// plus a measured overhead per entry. Claim of a new key beyond it fails
// with ErrFull, and Complete of a response that does not fit fails with an
// error matching idempotency.ErrResponseNotStorable. The live heap stays
// within a small factor of n (Go maps and slices keep the capacity they
// grew to). n <= 0 keeps DefaultMaxBytes; math.MaxInt64 sets no bound on
// the store, though a single body of 2 GiB or more is still refused.
func WithMaxBytes(n int64) Option {
	return func(c *config) { c.maxBytes = n }
}
