package mockserver_test

import (
	"testing"

	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
)

func TestMemoryLedgerConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T, opening map[string]int64) func() mockserver.Ledger {
		l := mockserver.NewMemoryLedger(opening)
		return func() mockserver.Ledger { return l }
	})
}
