package pgledger_test

import (
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// Every Ledger the opener returns has a pool of its own, as another process
// would.
func TestConformance(t *testing.T) {
	testenv.PostgresURL(t) // one skip for the whole suite
	ledgertest.Run(t, func(t *testing.T, opening map[string]int64) func() mockserver.Ledger {
		table := newTable(t, newPool(t))
		return func() mockserver.Ledger { return pgledger.New(newPool(t), table, opening) }
	})
}
