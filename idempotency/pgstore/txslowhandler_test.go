package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestTxHandlerSlowerThanTTLCommits: in transactional mode the claim is the
// transaction's row lock, which nobody else can take while the handler
// runs, however long that is. A handler that outlives the TTL must still
// have its writes and its outcome committed (the outcome then kept for
// the TTL from its completion), as a slow handler in lease mode does
// (TestTTLShorterThanHandler); refusing the commit because the uncommitted
// claim row had passed its expiry rolled every run back and answered 503,
// and every retry, as slow, the same: the operation could never succeed.
func TestTxHandlerSlowerThanTTLCommits(t *testing.T) {
	const ttl = 100 * time.Millisecond
	pool := newPool(t)
	s := newTxStore(t, pool)
	orders := ordersTable(t, pool, s.Table())
	h := &orderHandler{pool: pool, table: orders, who: "slow", hold: func(ctx context.Context) {
		select {
		case <-time.After(3 * ttl): // the claim row's expiry passes meanwhile
		case <-ctx.Done():
		}
	}}
	srv := instance(t, s, h, idempotency.WithTTL(ttl))
	r := post(ctxT(t), srv.URL, "slow", `{}`)
	if r.Err != nil || r.Status != 201 {
		t.Fatalf("a handler slower than the %v TTL got %+v; want 201, committed", ttl, r)
	}
	if n := count(t, pool, orders); n != 1 || h.runs.Load() != 1 {
		t.Fatalf("business rows %d, handler runs %d; want 1 and 1", n, h.runs.Load())
	}
}
