package memstore_test

import (
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
)

func newShared(t *testing.T) *memstore.Store {
	s := memstore.New()
	t.Cleanup(func() { s.Close() })
	return s
}

func TestScenarioExactlyOnce(t *testing.T) {
	scenario.ExactlyOnce(t, newShared(t))
}

func TestScenarioExactlyOnceWaitForResult(t *testing.T) {
	scenario.ExactlyOnce(t, newShared(t), idempotency.WithWaitForResult(2*time.Second))
}

func TestScenarioLedger(t *testing.T) {
	scenario.Ledger(t, newShared(t), scenario.NewMemBook())
}

func TestScenarioCrash(t *testing.T) {
	scenario.Crash(t, newShared(t), scenario.CrashLease)
}

func TestScenarioKeyReused(t *testing.T) {
	scenario.KeyReused(t, newShared(t))
}
