package otelidempotency_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestMain checks the test database once; see testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Postgres) }

// newTxStore returns a pgstore.TxStore on a fresh table, dropped at cleanup.
func newTxStore(t *testing.T) *pgstore.TxStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := testenv.PostgresPool(t)
	s := pgstore.NewTx(pool, pgstore.WithTable(testenv.PostgresTable(t, pool, "otelidempotency_test_")))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWrapStoreConformanceTx: a wrapped pgstore.TxStore keeps the Store,
// Watcher and TxStore contracts.
func TestWrapStoreConformanceTx(t *testing.T) {
	in := otelidempotency.New(otelidempotency.WithMeterProvider(newMeter(t).provider))
	storetest.Run(t, func(t *testing.T) idempotency.Store { return in.WrapStore(newTxStore(t), "pg") },
		storetest.Transactional, storetest.Watching)
}

// TestWrapStoreTransactionalMode: behind a wrapped pgstore.TxStore the
// Middleware runs in transactional mode, the handler finds its transaction
// with pgstore.TxFromContext, and the transaction's calls are timed.
func TestWrapStoreTransactionalMode(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	h := serve(in, newTxStore(t), app{before: func(r *http.Request) int {
		if _, ok := pgstore.TxFromContext(r.Context()); !ok {
			return http.StatusInternalServerError
		}
		return 0
	}})
	expect(t, post(h, "tx-1", body), 201)
	got := m.collect(t)
	for _, o := range []string{"begin_tx", "claim", "complete", "commit"} {
		if n := got.count(otelidempotency.MetricStoreDuration, op(o), attribute.String("saferetry.store.name", "test")); n != 1 {
			t.Errorf("%s timed %d times, want 1", o, n)
		}
	}
}
