package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTxHandlerStatementInFlightAtCommit: a handler that hands its
// transaction to a goroutine (an audit write, fire and forget) and returns
// while the goroutine's statement is still running. The request's Commit
// then ran on the connection at the same time as that statement: pgx's
// connection is not safe for that (a data race on its state), the Commit
// failed with "conn busy" and the request was answered 503 with the
// handler's writes rolled back; and a statement that passed the guard's
// check just before the Commit released the connection ran on it back in
// the pool, in another request's transaction. Now the Commit waits for
// the statement in flight, which commits with the request, and every
// later one is refused with pgx.ErrTxClosed.
func TestTxHandlerStatementInFlightAtCommit(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("inflight")
	tx, r, ptx := acquire(t, s, k)
	late := make(chan error, 1)
	go func() {
		_, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) SELECT 'late' FROM pg_sleep(0.2)`)
		late <- err
	}()
	waitActive(t, pool, biz)
	commitOutcome(t, tx, k, r.Token)
	if err := <-late; err != nil {
		t.Fatalf("the statement in flight at the commit failed: %v", err)
	}
	if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('after')`); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("a statement after the commit = %v; want pgx.ErrTxClosed", err)
	}
	if n := bizRows(t, pool, biz); n != 1 {
		t.Errorf("%d business rows; want 1, the statement in flight, committed with the request", n)
	}
}

// TestTxHandlerQueryRowInFlightAtCommit: the same audit write as
// TestTxHandlerStatementInFlightAtCommit, written as pgx's usual
// QueryRow(...).Scan (an INSERT ... RETURNING). pgx's QueryRow returns
// once the server described the row, before the statement ran, and Scan
// reads the rest (with the end of the statement); the lock that QueryRow
// held was let go in between, so the request's Commit ran on the
// connection while Scan still read it: "conn busy", and 503.
func TestTxHandlerQueryRowInFlightAtCommit(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("inflight-queryrow")
	tx, r, ptx := acquire(t, s, k)
	late := make(chan error, 1)
	go func() {
		var id string
		// The INSERT's row, then a row large enough that the server
		// sends what it has, then a sleep before the statement ends:
		// Scan reads the first row and waits for the end.
		late <- ptx.QueryRow(ctx, `WITH ins AS (INSERT INTO "`+biz+`" (id) VALUES ('late') RETURNING id)
			SELECT id FROM ins UNION ALL SELECT string_agg(g::text, ',') FROM generate_series(1, 200000) g
			UNION ALL SELECT pg_sleep(0.2)::text`).Scan(&id)
	}()
	waitActive(t, pool, biz)
	commitOutcome(t, tx, k, r.Token)
	if err := <-late; err != nil {
		t.Fatalf("the QueryRow in flight at the commit failed: %v", err)
	}
	if n := bizRows(t, pool, biz); n != 1 {
		t.Errorf("%d business rows; want 1, the statement in flight, committed with the request", n)
	}
}

// waitActive waits until a statement of another session that sleeps and
// names table runs on the server.
func waitActive(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%pg_sleep%'`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the goroutine's statement never showed up in pg_stat_activity")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTxHandlerQueryRowScansAsPgx: the handler's QueryRow, which reads the
// statement to its end before it returns, answers as pgx's does: no row,
// an error after the first row, a pgx.RowScanner, NULL.
func TestTxHandlerQueryRowScansAsPgx(t *testing.T) {
	_, s, _, ctx := newBizTxStore(t)
	_, _, ptx := acquire(t, s, key("queryrow-pgx"))
	var n int
	if err := ptx.QueryRow(ctx, `SELECT 1 WHERE false`).Scan(&n); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("no row: %v; want pgx.ErrNoRows", err)
	}
	if err := ptx.QueryRow(ctx, `SELECT g / (2 - g) FROM generate_series(1, 2) g`).Scan(&n); err == nil {
		t.Error("a division by zero after the first row: no error")
	}
	// The transaction is failed: the rest in another.
	_, _, ptx = acquire(t, s, key("queryrow-pgx2"))
	var v rowValues
	if err := ptx.QueryRow(ctx, `SELECT 7, NULL::text`).Scan(&v); err != nil || len(v) != 2 || v[0] != int32(7) || v[1] != nil {
		t.Errorf("RowScanner: %v, %v; want [7 <nil>]", v, err)
	}
	var p *string
	if err := ptx.QueryRow(ctx, `SELECT 7, NULL::text`).Scan(&n, &p); err != nil || n != 7 || p != nil {
		t.Errorf("Scan: %d, %v, %v; want 7, nil", n, p, err)
	}
}

// rowValues is a pgx.RowScanner that keeps the row's Values.
type rowValues []any

func (v *rowValues) ScanRow(rows pgx.Rows) (err error) {
	*v, err = rows.Values()
	return err
}
