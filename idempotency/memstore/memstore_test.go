package memstore_test

import (
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestNilOptionIgnored(t *testing.T) {
	s := memstore.New(nil, memstore.WithCleanupInterval(0), nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
