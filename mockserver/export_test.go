package mockserver

import "time"

// WithLedgerTimeout exposes the bound on the ledger reads and reset to
// the external tests, so that they wait a short while, not the default.
func WithLedgerTimeout(d time.Duration) Option {
	return func(c *config) { c.ledgerTimeout = d }
}
