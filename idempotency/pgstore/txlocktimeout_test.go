package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTxLockTimeoutKeptWhenBeginningFirst checks that the handler gets the
// session's lock_timeout, as set after connecting (SET, not a start-up
// parameter), also when the session does not default to read committed and
// the claim runs inside a transaction begun first: the claim's bound must
// not reset it to the server default. So does each path of the claim
// batch (claimPaths), and the plain INSERT's claim of a key with an
// expired row, which its ROLLBACK and the claim batch take over.
func TestTxLockTimeoutKeptWhenBeginningFirst(t *testing.T) {
	for _, tc := range []struct{ iso, path string }{
		{"read committed", "claim"}, {"repeatable read", "claim"},
		{"read committed", "insert"}, {"repeatable read", "insert"},
		{"read committed", "insert over an expired row"},
	} {
		t.Run(tc.iso+"/"+tc.path, func(t *testing.T) {
			iso := tc.iso
			pool := newPool(t, func(c *pgxpool.Config) {
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
				c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
					_, err := conn.Exec(ctx, `SET lock_timeout = '7s'`)
					return err
				}
			})
			s := newTxStore(t, pool)
			ctx := ctxT(t)
			if tc.path != "claim" {
				insertFirst(t, s)
			}
			if tc.path == "insert over an expired row" {
				if r, err := s.Store.Claim(ctx, key("lt"), "fp", time.Hour, time.Hour); err != nil || !r.Acquired {
					t.Fatalf("lease-mode claim: %+v %v", r, err)
				}
				if _, err := pool.Exec(ctx, `UPDATE `+pgx.Identifier{s.Table()}.Sanitize()+` SET expires_at = now() - interval '1 second'`); err != nil {
					t.Fatal(err)
				}
			}
			tx, r, ptx := acquire(t, s, key("lt"))
			if tc.path == "insert over an expired row" && r.TookOver {
				t.Errorf("the claim of an expired row = %+v; want a new claim, not a takeover", r)
			}
			var lt string
			if err := ptx.QueryRow(ctx, `SHOW lock_timeout`).Scan(&lt); err != nil || lt != "7s" {
				t.Errorf("the handler's lock_timeout = %q, %v; want the session's 7s", lt, err)
			}
			// A second claim in the same transaction keeps it too.
			if _, err := tx.Claim(ctx, key("lt2"), "fp", time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := ptx.QueryRow(ctx, `SHOW lock_timeout`).Scan(&lt); err != nil || lt != "7s" {
				t.Errorf("the handler's lock_timeout after a second claim = %q, %v; want the session's 7s", lt, err)
			}
		})
	}
}
