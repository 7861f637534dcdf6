package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
)

// TestTxClaimInSavepoint: a claim made while a savepoint of the handler's
// transaction is open (its Context taken before the claim, as tests of
// handlers do, then a pgx savepoint or the LargeObjects' savepoint begun)
// writes the claim's row in the subtransaction, whose xmin is the
// subtransaction's id, not pg_current_xact_id's. The check that the row
// is the open transaction's must take it as the transaction's own: the
// commit stores the answer, and a ROLLBACK TO SAVEPOINT the handler sends
// afterwards is not taken for a block it ended and began anew.
func TestTxClaimInSavepoint(t *testing.T) {
	for _, c := range []struct {
		name string
		// open begins the savepoint the claim runs in, and returns the
		// function that ends it (nil: it is left open).
		open func(context.Context, pgx.Tx) (func() error, error)
	}{
		{"pgx savepoint, released", func(ctx context.Context, h pgx.Tx) (func() error, error) {
			sp, err := h.Begin(ctx)
			if err != nil {
				return nil, err
			}
			return func() error { return sp.Commit(ctx) }, nil
		}},
		{"pgx savepoint, left open", func(ctx context.Context, h pgx.Tx) (func() error, error) {
			_, err := h.Begin(ctx)
			return nil, err
		}},
		{"LargeObjects", func(ctx context.Context, h pgx.Tx) (func() error, error) {
			lo := h.LargeObjects()
			_, err := lo.Create(ctx, 0)
			return nil, err
		}},
	} {
		for _, rollbackTo := range []bool{false, true} {
			name := c.name
			if rollbackTo {
				name += ", then ROLLBACK TO SAVEPOINT"
			}
			t.Run(name, func(t *testing.T) {
				pool, s, biz, ctx := newBizTxStore(t)
				tx, err := s.BeginTx(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { tx.Rollback(context.Background()) })
				h := handlerTx(t, tx)
				end, err := c.open(ctx, h)
				if err != nil {
					t.Fatal(err)
				}
				k := key("claim-in-savepoint")
				r, err := tx.Claim(ctx, k, "fp", time.Hour)
				if err != nil || !r.Acquired {
					t.Fatalf("Claim = %+v, %v", r, err)
				}
				if end != nil {
					if err := end(); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := h.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('kept')`); err != nil {
					t.Fatal(err)
				}
				if rollbackTo {
					if _, err := h.Exec(ctx, "SAVEPOINT mine"); err != nil {
						t.Fatal(err)
					}
					if _, err := h.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('undone')`); err != nil {
						t.Fatal(err)
					}
					if _, err := h.Exec(ctx, "ROLLBACK TO SAVEPOINT mine"); err != nil {
						t.Fatalf("ROLLBACK TO SAVEPOINT after a claim in a savepoint: %v", err)
					}
				}
				if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatalf("Commit of a claim made in a savepoint: %v", err)
				}
				if n := bizRows(t, pool, biz); n != 1 {
					t.Errorf("%d business rows; want 1", n)
				}
				e, ok, err := s.Get(ctx, k)
				if err != nil || !ok || e.State != idempotency.StateCompleted || e.Response.Status != 201 {
					t.Errorf("the entry after the commit = %+v, %v, %v; want completed with 201", e, ok, err)
				}
			})
		}
	}
}
