package redisstore_test

import (
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	redisOptions(t) // skip once, not in every subtest, when Redis is not configured
	storetest.Run(t, func(t *testing.T) idempotency.Store { s, _, _ := newStore(t); return s }, storetest.Watching)
}
