package redisledger_test

import (
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
	"github.com/saferetry/saferetry/mockserver/redisledger"
)

// Every Ledger the opener returns has a client of its own, as another
// process would.
func TestConformance(t *testing.T) {
	testenv.RedisURL(t) // one skip for the whole suite
	ledgertest.Run(t, func(t *testing.T, opening map[string]int64) func() mockserver.Ledger {
		prefix := newPrefix(t, newClient(t))
		return func() mockserver.Ledger { return redisledger.New(newClient(t), prefix, opening) }
	})
}
