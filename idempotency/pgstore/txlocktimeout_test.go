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
// not reset it to the server default.
func TestTxLockTimeoutKeptWhenBeginningFirst(t *testing.T) {
	for _, iso := range []string{"read committed", "repeatable read"} {
		t.Run(iso, func(t *testing.T) {
			pool := newPool(t, func(c *pgxpool.Config) {
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
				c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
					_, err := conn.Exec(ctx, `SET lock_timeout = '7s'`)
					return err
				}
			})
			s := newTxStore(t, pool)
			ctx := ctxT(t)
			tx, _, ptx := acquire(t, s, key("lt"))
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
