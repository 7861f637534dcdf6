package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// tracerPanicMarker marks the statements that markerTracer panics on.
const tracerPanicMarker = "/* the tracer panics */"

var errMarkerTracer = errors.New("tracer bug")

// markerTracer is a pgx tracer with a bug: it panics when a statement, or
// a statement of a batch, holds tracerPanicMarker, before pgx sends it.
type markerTracer struct{}

func (markerTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, tracerPanicMarker) {
		panic(errMarkerTracer)
	}
	return ctx
}

func (markerTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (markerTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if strings.Contains(q.SQL, tracerPanicMarker) {
			panic(errMarkerTracer)
		}
	}
	return ctx
}

func (markerTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (markerTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestTxHandlerStatementPanicLetsTheTxGo: a handler's Query or SendBatch
// that panics in pgx (a tracer's bug, before any rows or results exist)
// does not keep holding the request's transaction. A handler that
// recovers runs its next statement, and the request's Commit commits at
// once, rather than both waiting for rows that were never returned until
// their contexts end (the Commit failing, 503, and its writes lost).
func TestTxHandlerStatementPanicLetsTheTxGo(t *testing.T) {
	for name, send := range map[string]func(context.Context, pgx.Tx){
		"Query": func(ctx context.Context, ptx pgx.Tx) {
			rows, _ := ptx.Query(ctx, `SELECT 1 `+tracerPanicMarker)
			rows.Close()
		},
		"SendBatch": func(ctx context.Context, ptx pgx.Tx) {
			b := &pgx.Batch{}
			b.Queue(`SELECT 1 ` + tracerPanicMarker)
			_ = ptx.SendBatch(ctx, b).Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = markerTracer{} })
			s := newTxStore(t, pool)
			ctx := ctxT(t)
			k := key("statement-panic-" + name)
			tx, r, ptx := acquire(t, s, k)
			t.Cleanup(func() {
				// Before the pool's Close, which waits for the connection:
				// a Rollback whose wait ends closes it (after a Commit,
				// it does nothing).
				rctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = tx.Rollback(rctx)
			})
			func() {
				defer func() {
					if p := recover(); p != errMarkerTracer {
						t.Fatalf("recovered %v; want the tracer's panic", p)
					}
				}()
				send(ctx, ptx)
			}()
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if _, err := ptx.Exec(sctx, `SELECT 1`); err != nil {
				t.Fatalf("a statement after the recovered panic: %v; want it to run", err)
			}
			commitOutcome(t, tx, k, r.Token)
		})
	}
}

// armedTracer is a pgx tracer with a bug: once armed, the next statement
// panics in TraceQueryStart, before pgx sends it.
type armedTracer struct{ armed atomic.Bool }

func (a *armedTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if a.armed.CompareAndSwap(true, false) {
		panic(errMarkerTracer)
	}
	return ctx
}

func (*armedTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestTxHandlerRowsClosePanicLetsTheTxGo: rows of a handler's Query that
// ended the transaction block (END) record the claim when they are
// closed (see ErrHandlerEndedTx); a panic in that statement (a tracer's)
// lets the request's transaction go: the handler that recovers is told
// ErrHandlerEndedTx by its next statement, rather than wait for a lock
// that nobody holds any more.
func TestTxHandlerRowsClosePanicLetsTheTxGo(t *testing.T) {
	tracer := &armedTracer{}
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = tracer })
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	k := key("rows-close-panic")
	tx, _, ptx := acquire(t, s, k)
	t.Cleanup(func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	})
	rows, err := ptx.Query(ctx, "END")
	if err != nil {
		t.Fatal(err)
	}
	tracer.armed.Store(true)
	func() {
		defer func() {
			if p := recover(); p != errMarkerTracer {
				t.Fatalf("recovered %v; want the tracer's panic", p)
			}
		}()
		rows.Close()
	}()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := ptx.Exec(sctx, `SELECT 1`); !errors.Is(err, pgstore.ErrHandlerEndedTx) {
		t.Fatalf("a statement after the recovered panic: %v; want ErrHandlerEndedTx", err)
	}
}
