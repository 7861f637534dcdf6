package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestTxHandlerCopySourceStatement: a handler whose CopyFrom source runs a
// statement on the request's transaction (a lookup per row). The
// connection is in the COPY then, so pgx refuses the statement ("conn
// busy") and the CopyFrom fails; the handler answers. The source runs
// while CopyFrom holds the request's Tx, so the statement must not wait
// for it: that wait never ends, and the request hangs.
func TestTxHandlerCopySourceStatement(t *testing.T) {
	_, s, biz, ctx := newBizTxStore(t)
	tx, _, ptx := acquire(t, s, key("copy-source"))
	// No Rollback on a hang: it waits for the lock too.
	done := make(chan error, 1)
	go func() {
		rows := 0
		_, err := ptx.CopyFrom(ctx, pgx.Identifier{biz}, []string{"id"}, pgx.CopyFromFunc(func() ([]any, error) {
			if rows++; rows > 1 {
				return nil, nil
			}
			var n int
			if err := ptx.QueryRow(ctx, `SELECT 1`).Scan(&n); err != nil {
				return nil, err
			}
			return []any{"copied"}, nil
		}))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("CopyFrom succeeded; want the source's statement refused (the connection is in the COPY)")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CopyFrom whose source runs a statement on the transaction never returned")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}
