package pgstore

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

var _ pgx.Tx = (*handlerTx)(nil)

// handlerTx is the transaction a handler gets in transactional mode: the
// pgx.Tx of the request's transaction block, refusing every statement with
// pgx.ErrTxClosed once the request's Tx committed or rolled back. The
// COMMIT goes in a batch with the stored outcome, so the pgx.Tx itself
// never learns that it ended; without this guard a handler that kept it
// would run statements on a connection back in the pool, in another
// request's transaction. It is safe for concurrent use as far as the
// pgx.Tx it wraps is (that is, by one goroutine at a time).
type handlerTx struct {
	pgx.Tx
	ended atomic.Bool
}

func (h *handlerTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if h.ended.Load() {
		return nil, pgx.ErrTxClosed
	}
	return h.Tx.Begin(ctx)
}

// Commit and Rollback are the handler's, against the contract of
// TxFromContext; they end the transaction, and the request's Commit then
// fails.
func (h *handlerTx) Commit(ctx context.Context) error {
	if h.ended.Swap(true) {
		return pgx.ErrTxClosed
	}
	return h.Tx.Commit(ctx)
}

func (h *handlerTx) Rollback(ctx context.Context) error {
	if h.ended.Swap(true) {
		return pgx.ErrTxClosed
	}
	return h.Tx.Rollback(ctx)
}

func (h *handlerTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if h.ended.Load() {
		return 0, pgx.ErrTxClosed
	}
	return h.Tx.CopyFrom(ctx, table, columns, src)
}

func (h *handlerTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if h.ended.Load() {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	return h.Tx.SendBatch(ctx, b)
}

func (h *handlerTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if h.ended.Load() {
		return nil, pgx.ErrTxClosed
	}
	return h.Tx.Prepare(ctx, name, sql)
}

func (h *handlerTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if h.ended.Load() {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return h.Tx.Exec(ctx, sql, args...)
}

func (h *handlerTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if h.ended.Load() {
		return closedRows{}, pgx.ErrTxClosed
	}
	return h.Tx.Query(ctx, sql, args...)
}

func (h *handlerTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if h.ended.Load() {
		return closedRows{}
	}
	return h.Tx.QueryRow(ctx, sql, args...)
}

// closedRows are the rows of a statement refused by an ended handlerTx.
type closedRows struct{}

func (closedRows) Close()                                       {}
func (closedRows) Err() error                                   { return pgx.ErrTxClosed }
func (closedRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (closedRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (closedRows) Next() bool                                   { return false }
func (closedRows) Scan(...any) error                            { return pgx.ErrTxClosed }
func (closedRows) Values() ([]any, error)                       { return nil, pgx.ErrTxClosed }
func (closedRows) RawValues() [][]byte                          { return nil }
func (closedRows) Conn() *pgx.Conn                              { return nil }
func (closedRows) TypeMap() *pgtype.Map                         { return nil }
