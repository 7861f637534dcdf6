package pgstore_test

import (
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store { return newStore(t, nil) }, storetest.Watching)
}

// TestConformanceTx runs the suite on a TxStore: the Store contract of its
// lease mode, and its transactions.
func TestConformanceTx(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store { return newTxStore(t, nil) },
		storetest.Transactional, storetest.Watching)
}
