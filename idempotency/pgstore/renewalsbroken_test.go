package pgstore_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestRenewalsSurviveTheirConnectionsEndingTogether: the Store's renewal
// connections are never pinged before use, so that a renewal is one round
// trip. When the server ends every session at once (a restart, a
// failover, an operator's pg_terminate_backend, a pooler restarting), each
// of the kept connections broke, and each renewal took the next broken one
// and failed: with more of them than the lease keeper's retries fit in a
// lease, a handler that held its claim across the fault had its lease
// counted lost, was cancelled and answered 503, though the store answered
// again at once. One renewal that finds its connection broken must be
// enough: the next runs on a fresh connection.
func TestRenewalsSurviveTheirConnectionsEndingTogether(t *testing.T) {
	const renewalConns = 20
	// A lease long enough for a renewal to open a fresh connection on a
	// loaded machine (connections from a race-enabled binary, beside the
	// other packages' tests): at 300 ms the fixed store failed here two
	// runs of three at a load of 10. The keeper's retries are spaced in
	// proportion to the lease, so the broken connections outnumber those
	// that fit in a lease whatever its length.
	const lease = 1200 * time.Millisecond
	admin := newPool(t)
	app := testenv.RandomName("pgstore-renewals-")
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = app })
	s := newStore(t, pool, pgstore.WithRenewalConns(renewalConns))
	backends := func() int {
		var n int
		if err := admin.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var kill atomic.Bool
	var cause atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hold := 2 * lease / 3 // past a renewal (a third of the lease), which opens the renewal connections
		if kill.Load() {
			// Every session of the Store ends, its renewal connections'
			// among them, while the handler holds the claim.
			if _, err := admin.Exec(r.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
				t.Error(err)
			}
			hold = 3 * lease // several leases: renewals must succeed again
		}
		select {
		case <-time.After(hold):
			w.WriteHeader(http.StatusCreated)
		case <-r.Context().Done():
			cause.Store(context.Cause(r.Context()))
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	srv := instance(t, s, h, idempotency.WithLease(lease))
	ctx := ctxT(t)
	if r := post(ctx, srv.URL, "warm", `{}`); r.Err != nil || r.Status != http.StatusCreated {
		t.Fatalf("first request = %+v", r)
	}
	testenv.Eventually(t, "the renewal connections are open", func() bool { return backends() > renewalConns })
	kill.Store(true)
	r := post(ctx, srv.URL, "k", `{}`)
	if r.Err != nil || r.Status != http.StatusCreated {
		t.Fatalf("a handler holding its claim while the server ended the Store's sessions got %d (cancelled: %v); want 201", r.Status, cause.Load())
	}
}
