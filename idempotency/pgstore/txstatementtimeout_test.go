package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxStatementTimeoutBelowLockTimeoutReportsInProgress: an operator's
// statement_timeout (ALTER ROLE ... SET statement_timeout, or the
// server's) shorter than the lock timeout (WithLockTimeout, 2 s by
// default, above many a production statement_timeout) cut the wait of a
// duplicate's claim for the holder's uncommitted row as a failed statement
// (SQLSTATE 57014): the Middleware answered 503 ProblemStoreUnavailable
// and reported a store error for a healthy store, instead of 409 in
// progress. The claim's wait must end as a lock timeout, before the
// statement's, and leave the handler the session's statement_timeout and
// lock_timeout.
func TestTxStatementTimeoutBelowLockTimeoutReportsInProgress(t *testing.T) {
	for _, tc := range []struct{ iso, path string }{
		{"read committed", "claim"}, {"read committed", "insert"}, {"repeatable read", "claim"},
	} {
		t.Run(tc.iso+"/"+tc.path, func(t *testing.T) {
			iso := tc.iso
			pool := newPool(t, func(c *pgxpool.Config) {
				// As a role's or the database's setting: the session's default.
				c.ConnConfig.RuntimeParams["statement_timeout"] = "300ms"
				c.ConnConfig.RuntimeParams["lock_timeout"] = "7s"
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
			})
			s := newTxStore(t, pool, pgstore.WithLockTimeout(5*time.Second))
			if tc.path == "insert" {
				insertFirst(t, s)
			}
			ctx := ctxT(t)
			k := key("st")
			if _, r := beginClaim(t, s, k, "fp"); !r.Acquired {
				t.Fatalf("first Claim = %+v", r)
			}
			tx2, err := s.BeginTx(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx2.Rollback(context.Background())
			r2, err := tx2.Claim(ctx, k, "fp", time.Hour)
			if err != nil {
				t.Fatalf("Claim of a key held past the session's statement_timeout = %v; want it in progress", err)
			}
			if r2.Acquired || r2.Entry.State != idempotency.StateInProgress {
				t.Fatalf("Claim of a held key = %+v; want in progress", r2)
			}
			// The handler of an acquired claim keeps the session's settings.
			_, r3, ptx := acquire(t, s, key("st-other"))
			_ = r3
			var st, lt string
			if err := ptx.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('lock_timeout')`).Scan(&st, &lt); err != nil {
				t.Fatal(err)
			}
			if st != "300ms" || lt != "7s" {
				t.Errorf("the handler's statement_timeout, lock_timeout = %s, %s; want the session's 300ms, 7s", st, lt)
			}
		})
	}
}
