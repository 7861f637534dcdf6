package pgstore_test

import (
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store { return newStore(t, nil) })
}
