package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
)

var (
	_ idempotency.TxStore = (*TxStore)(nil)
	_ idempotency.Tx      = (*Tx)(nil)
)

// sqlstateLockNotAvailable is PostgreSQL's lock_not_available, raised when
// lock_timeout elapses.
const sqlstateLockNotAvailable = "55P03"

// TxStore is an idempotency.TxStore: given to idempotency.Middleware it makes
// the middleware run each protected request in one PostgreSQL transaction
// (see the package documentation for when to choose this mode). It embeds a
// lease-mode *Store over the same table, which provides CreateSchema,
// DeleteExpired, StartReaper and the plain Store methods. Create it with NewTx;
// the zero value is not usable. It is safe for concurrent use by multiple
// goroutines and processes; each Tx is used by one goroutine at a time.
type TxStore struct {
	*Store
	// lockTimeoutSQL bounds the wait of a transactional claim.
	lockTimeoutSQL string
}

// NewTx returns a TxStore over pool. The options are those of New;
// WithLockTimeout bounds how long a claim waits for a concurrent
// transaction's uncommitted claim on the same key. NewTx panics when the
// WithTable name is invalid.
func NewTx(pool *pgxpool.Pool, opts ...Option) *TxStore {
	s := New(pool, opts...)
	ms := (s.cfg.lockTimeout + time.Millisecond - 1) / time.Millisecond
	return &TxStore{
		Store:          s,
		lockTimeoutSQL: fmt.Sprintf("SET LOCAL lock_timeout = %d", int64(ms)),
	}
}

// BeginTx implements idempotency.TxStore. It starts a READ COMMITTED
// transaction on a connection from the pool; the connection returns to the
// pool when the transaction commits or rolls back.
func (s *TxStore) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	if err := s.checkPool(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	return &Tx{store: s, tx: tx}, nil
}

// Tx is one transaction of a TxStore, created by BeginTx; the zero value is
// not usable. It is used by one goroutine at a time. It costs four round
// trips per first execution (BEGIN, Claim, Complete, COMMIT) and one commit
// to disk.
type Tx struct {
	store *TxStore
	tx    pgx.Tx
}

type txKey struct{}

// Context implements idempotency.Tx: the returned context carries the
// pgx.Tx, which handlers get back with TxFromContext.
func (t *Tx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, t.tx)
}

// PgxTx returns the underlying pgx.Tx, the one TxFromContext returns to
// the handler.
func (t *Tx) PgxTx() pgx.Tx { return t.tx }

// TxFromContext returns the transaction that transactional mode hands to the
// handler, and whether ctx carries one. Handlers write through it so that
// their writes commit or roll back together with the idempotency record; they
// must not commit or roll it back themselves. Handlers may also be served by
// lease mode or a non-PostgreSQL store, in which case ok is false and they
// should use their own connection.
func TxFromContext(ctx context.Context) (tx pgx.Tx, ok bool) {
	tx, ok = ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Claim implements idempotency.Tx. The row is inserted uncommitted, so other
// transactions claiming the same key wait for this one to end. The wait of
// this claim is bounded by the lock timeout (WithLockTimeout), set for the
// claim statement only; when it elapses Claim reports an entry in progress
// whose Fingerprint is the one given (the blocking claim's is not readable
// yet) and whose LeaseRemaining is the lock timeout, and returns no error.
// The transaction is then aborted and must be rolled back. The row's lease is
// already lapsed: it only matters if the transaction commits without
// Complete, in which case the next claim with the same fingerprint takes over.
func (t *Tx) Claim(ctx context.Context, k idempotency.Key, fingerprint string, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := claim(ctx, txClaimer{t}, t.store.sql.claim, k, fingerprint, 0, ttl)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateLockNotAvailable {
		return idempotency.ClaimResult{Entry: idempotency.Entry{
			State:          idempotency.StateInProgress,
			Fingerprint:    fingerprint,
			LeaseRemaining: t.store.cfg.lockTimeout,
		}}, nil
	}
	if err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: tx claim: %w", err)
	}
	return res, nil
}

// txClaimer runs the claim statement in one round trip, between
// SET LOCAL lock_timeout and a reset of lock_timeout to its session value.
type txClaimer struct{ t *Tx }

func (c txClaimer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	b := &pgx.Batch{}
	b.Queue(c.t.store.lockTimeoutSQL)
	b.Queue(sql, args...)
	b.Queue("SET LOCAL lock_timeout TO DEFAULT")
	return &batchRow{br: c.t.tx.SendBatch(ctx, b)}
}

// batchRow reads the second result of a three-statement batch as a pgx.Row.
type batchRow struct{ br pgx.BatchResults }

func (r *batchRow) Scan(dest ...any) error {
	if _, err := r.br.Exec(); err != nil {
		r.br.Close()
		return err
	}
	err := r.br.QueryRow().Scan(dest...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		r.br.Close()
		return err
	}
	if _, rerr := r.br.Exec(); rerr != nil {
		r.br.Close()
		return rerr
	}
	if cerr := r.br.Close(); cerr != nil {
		return cerr
	}
	return err
}

// Complete implements idempotency.Tx: it stores resp in the transaction. It
// returns an error wrapping idempotency.ErrStaleToken when this transaction
// does not hold the claim with token.
func (t *Tx) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	return t.store.settle(ctx, t.tx, "tx complete", t.store.sql.complete, k, token, &resp, ttl)
}

// Commit implements idempotency.Tx.
func (t *Tx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	return nil
}

// Rollback implements idempotency.Tx. It returns nil after Commit or a
// previous Rollback.
func (t *Tx) Rollback(ctx context.Context) error {
	err := t.tx.Rollback(ctx)
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgstore: rollback: %w", err)
	}
	return nil
}
