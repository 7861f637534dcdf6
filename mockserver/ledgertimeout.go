package mockserver

import (
	"context"
	"time"
)

// defaultLedgerTimeout bounds each call the Server makes to its ledger but
// Pay: a read or a reset, so that it fails, and is answered 503, when the
// ledger's database stalls and never answers (a partition, a failover
// behind an address that still accepts connections) instead of holding
// the request, or a Go caller, for ever. Pay runs under the claim, which
// the idempotency Middleware bounds.
const defaultLedgerTimeout = 5 * time.Second

// ledgerContext returns the context of one ledger call made for parent:
// parent's, ending at the latest after the server's ledger bound.
func (s *Server) ledgerContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.ledgerT)
}
