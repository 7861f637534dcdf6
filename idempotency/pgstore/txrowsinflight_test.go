package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// readLate is how long the goroutines of these tests keep their rows or
// batch results open after the request's Commit began.
const readLate = 100 * time.Millisecond

// TestTxHandlerRowsOpenAtCommit: a handler that hands its transaction to a
// goroutine which runs a Query (an INSERT ... RETURNING, an audit write)
// and still reads its rows when the handler returns. pgx's connection is
// busy until the rows are closed: the request's Commit ran on it at the
// same time, failed "conn busy", the client got 503 for a handler that
// succeeded and the write was rolled back. Now the Commit waits until the
// rows are closed, and the write commits with the request.
func TestTxHandlerRowsOpenAtCommit(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("rows-open")
	tx, r, ptx := acquire(t, s, k)
	queried, read := make(chan struct{}), make(chan error, 1)
	go func() {
		rows, err := ptx.Query(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('late'), ('later') RETURNING id`)
		close(queried)
		if err != nil {
			read <- err
			return
		}
		time.Sleep(readLate) // the request's Commit runs meanwhile
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				read <- err
				return
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			read <- err
			return
		}
		if len(ids) != 2 {
			read <- fmt.Errorf("rows read: %q; want two", ids)
			return
		}
		read <- nil
	}()
	<-queried
	commitOutcome(t, tx, k, r.Token)
	if err := <-read; err != nil {
		t.Fatalf("the goroutine's rows: %v", err)
	}
	if n := bizRows(t, pool, biz); n != 2 {
		t.Errorf("%d business rows; want 2, the goroutine's, committed with the request", n)
	}
}

// TestTxHandlerBatchOpenAtCommit: the same as
// TestTxHandlerRowsOpenAtCommit with a batch (SendBatch) whose results
// the goroutine reads after the handler returned.
func TestTxHandlerBatchOpenAtCommit(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("batch-open")
	tx, r, ptx := acquire(t, s, k)
	sent, read := make(chan struct{}), make(chan error, 1)
	go func() {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO "` + biz + `" (id) VALUES ('one')`)
		b.Queue(`INSERT INTO "` + biz + `" (id) VALUES ('two')`)
		br := ptx.SendBatch(ctx, b)
		close(sent)
		time.Sleep(readLate) // the request's Commit runs meanwhile
		for range b.Len() {
			if _, err := br.Exec(); err != nil {
				br.Close()
				read <- err
				return
			}
		}
		read <- br.Close()
	}()
	<-sent
	commitOutcome(t, tx, k, r.Token)
	if err := <-read; err != nil {
		t.Fatalf("the goroutine's batch: %v", err)
	}
	if n := bizRows(t, pool, biz); n != 2 {
		t.Errorf("%d business rows; want 2, the goroutine's batch, committed with the request", n)
	}
}

// TestTxHandlerStatementWhileRowsOpen: a handler that runs a statement
// before closing the rows of its Query gets an error at once, as pgx
// answers ("conn busy"): the rows hold the transaction until they are
// closed, and the statement must not wait for that (it never would: the
// goroutine that would close them is the one waiting). Once they are
// closed the transaction goes on. Rows read to their end are closed by
// pgx itself: a handler that reads them all need not close them.
func TestTxHandlerStatementWhileRowsOpen(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("rows-busy")
	tx, r, ptx := acquire(t, s, k)
	rows, err := ptx.Query(ctx, `SELECT g FROM generate_series(1, 3) g`)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('refused')`)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a statement while the rows are open succeeded; want conn busy")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a statement while the rows are open never returned")
	}
	rows.Close()
	if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('one')`); err != nil {
		t.Fatalf("a statement after the rows were closed: %v", err)
	}
	rows, err = ptx.Query(ctx, `SELECT g FROM generate_series(1, 3) g`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('two')`); err != nil {
		t.Fatalf("a statement after the rows were read to their end: %v", err)
	}
	commitOutcome(t, tx, k, r.Token)
	if n := bizRows(t, pool, biz); n != 2 {
		t.Errorf("%d business rows; want 2", n)
	}
}

// TestTxHandlerRowsNeverClosed: a handler that forgets to close its rows
// and returns. The request's Commit waits for them as long as its context
// lets it, then fails, saying so; the Rollback that follows does not wait
// again, and the connection, busy for ever, is closed rather than kept:
// the pool serves the next request.
func TestTxHandlerRowsNeverClosed(t *testing.T) {
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	k := key("rows-leaked")
	tx, r, ptx := acquire(t, s, k)
	if _, err := ptx.Query(ctx, `SELECT g FROM generate_series(1, 3) g`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, readLate)
	defer cancel()
	start := time.Now()
	if err := tx.Commit(cctx); err == nil {
		t.Fatal("Commit with the handler's rows never closed succeeded")
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if err := tx.Rollback(rctx); err != nil {
		t.Logf("Rollback: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Commit and Rollback took %v; want about the Commit's context (%v)", d, readLate)
	}
	// The pool's one connection is free again (or replaced).
	tx2, r2 := beginClaim(t, s, k, "fp")
	if !r2.Acquired {
		t.Errorf("the retry's claim = %+v; want it acquired (nothing was committed)", r2)
	}
	if err := tx2.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTxHandlerRowsOpenAtRollback: a handler that leaves its rows open
// and answers a status that is not stored (500, on an error path that
// skips the Close), or panics with them open. Nothing is to be kept: the
// request's Rollback waited for the rows, which nobody would ever close,
// until the Middleware's store timeout (5 s), and the request and its
// pool connection were held that long, where the Rollback had closed the
// busy connection at once before the rows held the transaction. Rows
// that are open when the Rollback comes are not waited for: whatever a
// goroutine still reads is rolled back anyway. The pool's one connection
// serves the next request.
func TestTxHandlerRowsOpenAtRollback(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics %v", panics), func(t *testing.T) {
			pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
			s := newTxStore(t, pool)
			ctx := ctxT(t)
			var closes atomic.Bool // the handler closes its rows
			srv := instance(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := pgstore.TxFromContext(r.Context())
				rows, err := tx.Query(r.Context(), `SELECT g FROM generate_series(1, 3) g`)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				rows.Next()
				if closes.Load() {
					rows.Close()
					w.WriteHeader(http.StatusCreated)
					return
				}
				if panics {
					panic("the handler fails with its rows open")
				}
				w.WriteHeader(http.StatusInternalServerError)
			}))
			start := time.Now()
			first := post(ctx, srv.URL, "rows-open-rollback", `{}`)
			if d := time.Since(start); d > time.Second {
				t.Errorf("the request whose handler left its rows open took %v (%+v); want it answered at once: nothing is kept", d, first)
			}
			closes.Store(true)
			if second := post(ctx, srv.URL, "rows-open-rollback", `{}`); second.Status != http.StatusCreated {
				t.Errorf("the retry = %+v; want 201, run again on the pool's connection", second)
			}
		})
	}
}

// TestTxHandlerConnWhileRowsOpen: a handler that asks its transaction for
// its Conn while reading rows (for its type map, say: pgx's Tx.Conn never
// returns nil) got nil, since the rows held the transaction, and code
// that used it panicked. The connection is still the transaction's: Conn
// returns it, and it is nil only once the request's Tx ended.
func TestTxHandlerConnWhileRowsOpen(t *testing.T) {
	_, s, _, ctx := newBizTxStore(t)
	k := key("conn-rows-open")
	tx, r, ptx := acquire(t, s, k)
	before := ptx.Conn()
	if before == nil {
		t.Fatal("Conn() before any rows = nil")
	}
	rows, err := ptx.Query(ctx, `SELECT g FROM generate_series(1, 3) g`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
		if c := ptx.Conn(); c != before {
			t.Fatalf("Conn() while the rows are open = %p; want the transaction's connection %p", c, before)
		}
	}
	if err := rows.Err(); err != nil || n != 3 {
		t.Fatalf("rows: %d, %v", n, err)
	}
	commitOutcome(t, tx, k, r.Token)
	if c := ptx.Conn(); c != nil {
		t.Errorf("Conn() after the request's commit = %p; want nil", c)
	}
}
