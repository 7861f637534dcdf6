package pgstore

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

var _ pgx.Tx = (*handlerTx)(nil)

// handlerTx is the transaction a handler gets in transactional mode: the
// pgx.Tx of the request's transaction block, refusing every statement with
// pgx.ErrTxClosed once the request's Tx began to commit or roll back (see
// lock). The COMMIT goes in a batch with the stored outcome, so the pgx.Tx itself
// never learns that it ended; without this guard a handler that kept it
// would run statements on a connection back in the pool, in another
// request's transaction. A Tx whose Context was taken before any claim
// opened the block (the Middleware never does that) begins the block at
// the first statement. A savepoint begun on it (Begin) is a handlerTx too,
// refused once the request's Tx ended like the transaction itself: pgx's
// savepoint runs its statements through the pgx.Tx, which never learned
// that the COMMIT ended it. It is used by one goroutine at a time, like
// its Tx, with one exception: a statement that a goroutine of the handler
// still runs, or rows and batch results that it still reads, when the
// request ends (see lock).
type handlerTx struct {
	t     *Tx
	ended atomic.Bool // on the root: the request's transaction ended
	// commitAsked, on the root: the handler called Commit, which was
	// refused (ErrHandlerCommit); its Rollback is then a no-op.
	commitAsked atomic.Bool
	root        *handlerTx // the handlerTx of the request's transaction (itself there)
	sp          pgx.Tx     // the savepoint, on a handlerTx that Begin returned
}

// ErrHandlerCommit is what Commit returns on the transaction a handler gets
// from TxFromContext, and nothing is committed: the Middleware commits that
// transaction itself, together with the stored answer, so that the
// handler's writes are committed if and only if the answer is. A handler
// that committed them first would leave them committed beside a key still
// in progress, and the client's retry would run it, and write, again.
// After it, the transaction goes on, and its Rollback does nothing, as
// pgx's Rollback after a Commit does, so that pgx's usual "defer
// tx.Rollback(ctx)" keeps the writes for the Middleware's commit; answer
// the request as if Commit had succeeded (a status of 500 or more rolls
// everything back). A savepoint's Commit (Begin) is not refused.
var ErrHandlerCommit = errors.New("pgstore: a handler must not commit the request's transaction: the Middleware commits it with the stored answer (nothing was committed)")

// ErrHandlerEndedTx is the error of a statement that the handler sent
// through the transaction from TxFromContext and that ended the request's
// transaction block: COMMIT, END, ROLLBACK or ABORT sent as SQL (Exec,
// Query, SendBatch), which the Middleware's commit would otherwise have
// followed outside any transaction, storing the handler's answer as if
// its writes had committed with it. Every later statement of the handler
// is refused with it, so that none commits on its own, and the request's
// Commit fails with it: the client gets 503 (ProblemCommitFailed),
// whatever the handler answers, unless it answers a status that is not
// stored (500 on the error, say). What the statement committed is kept:
// when it committed the claim (COMMIT, END), the key is recorded at once,
// in a statement of its own, as completed with status 500 but not
// replayable, and retries get 410 (ProblemResponseTooLarge): the
// operation ran, at least in part, and must not run again (the Commit's
// error wraps idempotency.ErrRecordedNotReplayable then, and the 503's
// detail says so). When it
// rolled the claim back with the writes (ROLLBACK, ABORT), nothing is
// recorded, and a retry runs the handler again. A statement that ended the
// block and began another ("COMMIT; BEGIN", COMMIT AND CHAIN) is treated
// the same way, once caught (see TxFromContext), the block it began rolled
// back, and so is one that committed after its context cut it short.
var ErrHandlerEndedTx = errors.New("pgstore: the handler's statement ended the request's transaction (COMMIT, END, ROLLBACK or ABORT sent as SQL): the Middleware commits it with the stored answer; what it committed is recorded as not replayable")

// newHandlerTx returns the handlerTx of t's transaction.
func newHandlerTx(t *Tx) *handlerTx {
	h := &handlerTx{t: t}
	h.root = h
	return h
}

// lock holds the request's Tx (txLock) for one statement of the handler,
// and returns the function that lets it go. A handler may return while a
// goroutine of its own still runs a statement on the transaction (an audit
// write, fire and forget), or still reads its rows (Query) or a batch's
// results (SendBatch). Without the lock that statement and the request's
// Commit ran on the connection at once, which a pgx.Conn does not allow
// (the Commit failed "conn busy", and the request got 503), and a
// statement that passed the check of ended just before the Tx released its
// connection ran on it in the pool. The request's Commit and Rollback take
// the lock too (txLock.lockEnd): they wait for the statement running,
// which commits or rolls back with the request, and the Commit waits for
// rows or results until they are closed, while the Rollback closes the
// connection under them at once (see Tx.Rollback). From the moment the
// Commit or Rollback asks for the lock, a statement that asks for it, or
// waits for it already (behind the one running), is refused at once with
// pgx.ErrTxClosed, so that a goroutine issuing statements in a loop
// neither delays the request's end nor runs a statement that began after
// it. Each wait ends with its context: the Commit's and Rollback's with
// the Middleware's store timeout, a statement's with its own.
//
// Rows and batch results hold the lock until they are closed (pgx closes
// rows read to their end, or whose Scan failed), as pgx's connection is
// busy exactly that long, and mark it busy: a statement on the
// transaction meanwhile, of the goroutine that reads them or of another,
// is refused at once with errRowsOpen, as pgx refuses it ("conn busy"),
// instead of waiting for a Close that may never come; so is one asking
// after the Commit or Rollback did. So is one that a CopyFrom's source
// runs, which pgx reads, holding the lock, on a goroutine of pgx's own:
// the connection is in the COPY, and the statement is refused with
// errCopyBusy, as pgx refuses it; so is a statement of another goroutine
// that comes while the source runs.
func (h *handlerTx) lock(ctx context.Context) (unlock func(), err error) {
	if err := h.t.lk.lock(ctx); err != nil {
		return nil, err
	}
	return h.t.lk.unlock, nil
}

// errCopyBusy refuses a statement on the handler's transaction while a
// CopyFrom's source runs (see handlerTx.lock).
var errCopyBusy = errors.New("pgstore: the transaction is in a CopyFrom, whose source runs (conn busy)")

// errRowsOpen refuses a statement on the handler's transaction while rows
// of its Query or results of its SendBatch are open (see handlerTx.lock).
var errRowsOpen = errors.New("pgstore: rows (Query) or batch results (SendBatch) of the transaction are open: close them first (conn busy)")

// lockedTx holds the lock (lock) and returns tx, and the function that
// lets the lock go (a no-op when err is not nil).
func (h *handlerTx) lockedTx(ctx context.Context) (tx pgx.Tx, unlock func(), err error) {
	unlock, err = h.lock(ctx)
	if err != nil {
		return nil, func() {}, err
	}
	if tx, err = h.tx(ctx); err != nil {
		unlock()
		return nil, func() {}, err
	}
	return tx, unlock, nil
}

// copySource is the source of the handler's CopyFrom: while pgx reads it,
// the lock that the CopyFrom holds is marked busy (errCopyBusy), so that
// a statement that it runs on the transaction is refused instead of
// waiting for the CopyFrom.
type copySource struct {
	src pgx.CopyFromSource
	lk  *txLock
}

func (c copySource) Next() bool {
	c.lk.setBusy(errCopyBusy)
	defer c.lk.setBusy(nil)
	return c.src.Next()
}

func (c copySource) Values() ([]any, error) {
	c.lk.setBusy(errCopyBusy)
	defer c.lk.setBusy(nil)
	return c.src.Values()
}

func (c copySource) Err() error {
	c.lk.setBusy(errCopyBusy)
	defer c.lk.setBusy(nil)
	return c.src.Err()
}

// tx returns the savepoint, or the transaction block, begun now if need
// be. Its caller holds the lock.
func (h *handlerTx) tx(ctx context.Context) (pgx.Tx, error) {
	if h.root.ended.Load() {
		return nil, pgx.ErrTxClosed
	}
	if h.t.blockEnded {
		return nil, ErrHandlerEndedTx
	}
	if err := h.t.checkBlock(ctx, nil); err != nil {
		return nil, err // ended through its Conn (see TxFromContext)
	}
	if h.sp != nil {
		return h.sp, nil
	}
	if h.t.tx == nil {
		tx, err := h.t.pgxConn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return nil, err
		}
		h.t.tx = tx
	}
	return h.t.tx, nil
}

// Begin begins a savepoint, refused like h once the request's Tx ended.
func (h *handlerTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, unlock, err := h.lockedTx(ctx)
	defer unlock()
	if err != nil {
		return nil, err
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &handlerTx{t: h.t, root: h.root, sp: sp}, nil
}

// Commit of the request's transaction is refused with ErrHandlerCommit
// (see there). Its Rollback, against the contract of TxFromContext unless
// it follows that Commit, rolls the transaction back, and the request's
// Commit then fails (the client gets 503, and nothing was done). Those of
// a savepoint release it or roll back to it.
func (h *handlerTx) Commit(ctx context.Context) error {
	if h.sp == nil {
		if h.ended.Load() {
			return pgx.ErrTxClosed
		}
		h.commitAsked.Store(true)
		return ErrHandlerCommit
	}
	return h.end(ctx, pgx.Tx.Commit)
}

func (h *handlerTx) Rollback(ctx context.Context) error {
	if h.sp == nil && h.commitAsked.Load() {
		return pgx.ErrTxClosed
	}
	return h.end(ctx, pgx.Tx.Rollback)
}

// end ends the savepoint, or the request's transaction, with finish (Commit
// or Rollback). The latter is marked ended before finish runs, so that h
// refuses every later statement whether or not finish succeeds.
func (h *handlerTx) end(ctx context.Context, finish func(pgx.Tx, context.Context) error) error {
	tx, unlock, err := h.lockedTx(ctx)
	defer unlock()
	if err != nil {
		return err
	}
	if h.sp == nil {
		h.ended.Store(true)
	}
	return finish(tx, ctx)
}

func (h *handlerTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, unlock, err := h.lockedTx(ctx)
	defer unlock()
	if err != nil {
		return 0, err
	}
	n, err := tx.CopyFrom(ctx, table, columns, copySource{src, &h.t.lk})
	return n, h.t.checkBlock(ctx, err)
}

// SendBatch returns results that hold the request's Tx until they are
// closed (see lock).
func (h *handlerTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, unlock, err := h.lockedTx(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	held := false
	defer unlockUnlessHeld(unlock, &held)
	h.t.suspect.Store(true)
	for _, q := range b.QueuedQueries {
		if setsSession(pgconn.CommandTag{}, q.SQL) {
			h.t.sessionSet = true
		}
	}
	br := tx.SendBatch(ctx, b)
	h.t.lk.setBusy(errRowsOpen)
	held = true
	return &heldBatch{BatchResults: br, ctx: ctx, t: h.t, b: b}
}

// unlockUnlessHeld lets the lock go unless *held: Query and SendBatch
// defer it, so that a panic in pgx (a tracer's) before their rows or
// results exist, which would hold it, lets it go, rather than leave every
// later statement and the request's end waiting for a Close that cannot
// come.
func unlockUnlessHeld(unlock func(), held *bool) {
	if !*held {
		unlock()
	}
}

// LargeObjects begins the block, if need be, and a savepoint the first
// time, without a deadline; when that fails the returned LargeObjects must
// not be used. Its statements, and those of the large objects it opens,
// run on the transaction until the request ends, and are refused with
// pgx.ErrTxClosed after that (see Tx.largeObjects). Unlike the
// transaction's own statements they are not waited for (see lock): they
// must end before the handler returns.
func (h *handlerTx) LargeObjects() pgx.LargeObjects {
	tx, unlock, err := h.lockedTx(context.Background())
	defer unlock()
	if err != nil {
		return pgx.LargeObjects{}
	}
	lo, err := h.t.largeObjects(context.Background(), tx)
	if err != nil {
		return pgx.LargeObjects{}
	}
	return lo
}

func (h *handlerTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, unlock, err := h.lockedTx(ctx)
	defer unlock()
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

func (h *handlerTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, unlock, err := h.lockedTx(ctx)
	defer unlock()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	h.t.suspectSQL(sql)
	tag, err := tx.Exec(ctx, sql, args...)
	return tag, h.t.checkTag(ctx, tag, sql, h.t.settleCutShort(ctx, err, sql))
}

// Query returns rows that hold the request's Tx until they are closed
// (see lock).
func (h *handlerTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, unlock, err := h.lockedTx(ctx)
	if err != nil {
		return failedRows{err}, err
	}
	held := false
	defer unlockUnlessHeld(unlock, &held)
	h.t.suspectSQL(sql)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		rows.Close()
		err = h.t.checkBlock(ctx, h.t.settleCutShort(ctx, err, sql))
		return failedRows{err}, err
	}
	h.t.lk.setBusy(errRowsOpen)
	held = true
	return &heldRows{Rows: rows, ctx: ctx, t: h.t, sql: sql}, nil
}

func (h *handlerTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	tx, unlock, err := h.lockedTx(ctx)
	defer unlock()
	if err != nil {
		return failedRows{err}
	}
	h.t.suspectSQL(sql)
	row := queryRow(ctx, tx, sql, args...)
	var tag pgconn.CommandTag
	var rowErr error
	switch r := row.(type) {
	case *readRow:
		tag = r.tag
	case failedRows:
		rowErr = r.err
	}
	if err := h.t.checkTag(ctx, tag, sql, h.t.settleCutShort(ctx, rowErr, sql)); err != nil {
		return failedRows{err}
	}
	return row
}

// Conn returns the connection of the request's transaction, nil once the
// request's Tx ended (and returned it to the pool, or closed it), or its
// Commit or Rollback asked for the transaction (see lock). It waits for a
// statement that another goroutine of the handler runs, but not for rows
// or batch results that are open, or a CopyFrom's source (see lock): the
// connection is still the transaction's, busy (pgx refuses a statement
// on it), and its holder may be the goroutine that asks; it is returned
// then even while the request's Commit waits for them.
func (h *handlerTx) Conn() *pgx.Conn {
	unlock, err := h.lock(context.Background())
	if err == nil {
		defer unlock()
	}
	if errors.Is(err, pgx.ErrTxClosed) || h.root.ended.Load() {
		return nil
	}
	h.t.suspect.Store(true) // see Tx.suspect
	return h.t.pgxConn
}

// failedRows are the rows of a statement that could not run: err is why.
type failedRows struct{ err error }

func (failedRows) Close()                                       {}
func (r failedRows) Err() error                                 { return r.err }
func (failedRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (failedRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (failedRows) Next() bool                                   { return false }
func (r failedRows) Scan(...any) error                          { return r.err }
func (r failedRows) Values() ([]any, error)                     { return nil, r.err }
func (failedRows) RawValues() [][]byte                          { return nil }
func (failedRows) Conn() *pgx.Conn                              { return nil }
func (failedRows) TypeMap() *pgtype.Map                         { return nil }
