package outbox

import (
	"testing"
	"time"
)

// SetSettleTimeout sets settleTimeout for the rest of t.
func SetSettleTimeout(t *testing.T, d time.Duration) {
	old := settleTimeout
	settleTimeout = d
	t.Cleanup(func() { settleTimeout = old })
}
