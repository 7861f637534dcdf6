package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// heldRows are the rows of the handler's Query: they hold the lock of the
// request's Tx (handlerTx.lock) until they are closed, by Close, or by pgx
// itself when Next reaches their end or Scan or Values fails, as pgx's
// connection is busy exactly that long. Once closed, they check that the
// statement left the transaction block open (Tx.checkTag), and Err
// reports ErrHandlerEndedTx if it did not. Like pgx's rows, they are used
// by one goroutine at a time.
type heldRows struct {
	pgx.Rows
	ctx      context.Context // the Query's
	t        *Tx
	sql      string // the Query's
	released bool
	err      error // the block check's
}

// release checks the block and lets the lock go, once: the rows are
// closed.
func (r *heldRows) release() {
	if !r.released {
		r.released = true
		defer r.t.lk.unlock() // also when the block check panics (a tracer)
		r.err = r.t.checkTag(r.ctx, r.Rows.CommandTag(), r.sql, r.t.settleCutShort(r.ctx, r.Rows.Err(), r.sql))
	}
}

func (r *heldRows) Close() {
	r.Rows.Close()
	r.release()
}

func (r *heldRows) Err() error {
	if r.err != nil {
		return r.err // holds the rows' own error, if any
	}
	return r.Rows.Err()
}

func (r *heldRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close() // pgx closed them
	return false
}

func (r *heldRows) Scan(dest ...any) error {
	err := r.Rows.Scan(dest...)
	if err != nil {
		r.Close() // pgx closed them
	}
	return err
}

func (r *heldRows) Values() ([]any, error) {
	v, err := r.Rows.Values()
	if err != nil {
		r.Close() // pgx closed them
	}
	return v, err
}

// heldBatch are the results of the handler's SendBatch: they hold the
// lock of the request's Tx (handlerTx.lock) until they are closed, as
// pgx's connection is busy exactly that long. Their Close checks that the
// batch left the transaction block open (Tx.checkBlock). Like pgx's, they
// are used by one goroutine at a time.
type heldBatch struct {
	pgx.BatchResults
	ctx      context.Context // the SendBatch's
	t        *Tx
	b        *pgx.Batch
	released bool
}

func (b *heldBatch) Close() error {
	err := b.BatchResults.Close()
	if !b.released {
		b.released = true
		defer b.t.lk.unlock() // also when the block check panics (a tracer)
		if err != nil {
			sqls := make([]string, len(b.b.QueuedQueries))
			for i, q := range b.b.QueuedQueries {
				sqls[i] = q.SQL
			}
			err = b.t.settleCutShort(b.ctx, err, sqls...)
		}
		err = b.t.checkBlock(b.ctx, err)
	}
	return err
}
