package redisstore_test

import (
	"testing"

	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
)

// TestExactlyOnceAcrossInstances: three instances, each its own middleware
// over one Redis store; 50 keys sent 20 times each at once.
func TestExactlyOnceAcrossInstances(t *testing.T) {
	s, _, _ := newStore(t)
	scenario.ExactlyOnce(t, s)
}

// TestLedger: debits through several instances with duplicates and dropped
// responses, retried by saferetry.Transport; balances must add up.
func TestLedger(t *testing.T) {
	s, _, _ := newStore(t)
	scenario.Ledger(t, s, scenario.NewMemBook())
}

// TestKeyReusedAcrossInstances: a key sent again with another body, to
// every instance, in progress and completed, is answered 422 and never
// runs.
func TestKeyReusedAcrossInstances(t *testing.T) {
	s, _, _ := newStore(t)
	scenario.KeyReused(t, s)
}

// TestCrashScenario: the shared crash scenario (a frozen instance whose
// renewals stop, takeover after scenario.CrashLease, the zombie's late Complete
// refused) on Redis.
func TestCrashScenario(t *testing.T) {
	s, _, _ := newStore(t)
	scenario.Crash(t, s, scenario.CrashLease)
}
