package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/mockserver"
)

// sqlstateUniqueViolation is PostgreSQL's unique_violation.
const sqlstateUniqueViolation = "23505"

// Pay implements mockserver.Ledger (see the package documentation) in one
// round trip, in the transaction of pgstore.TxFromContext or in one of its
// own. It stores Created to the millisecond, in UTC, and returns the
// payment as stored, the same on every later call with ref while that
// payment is kept; then it retires it (see the package documentation), in
// the same transaction as the new payment. It refuses an amount that is
// not positive.
//
// Before its statement, Pay takes a transaction-scoped advisory lock on
// ref, so that a second transaction paying under the same ref (a takeover
// racing the paused run it took over) waits for the first to end and then
// finds its payment. Should a payment under ref still be recorded at the
// same moment by a transaction that skipped the lock, Pay's statement
// violates the ref's unique constraint, which aborts the transaction: on its
// own, Pay then rolls back and answers that payment as found (two more
// round trips); in the caller's transaction it returns the error, and the
// caller must roll back (the Middleware does, on the Server's 503).
func (l *Ledger) Pay(ctx context.Context, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	if err := ctx.Err(); err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("pgledger: pay: %w", err)
	}
	if p.Amount <= 0 {
		return mockserver.Payment{}, false, fmt.Errorf("pgledger: pay: amount %d is not positive", p.Amount)
	}
	var (
		got   mockserver.Payment
		found bool
		err   error
	)
	if tx, ok := pgstore.TxFromContext(ctx); ok {
		// Not checked: the transaction is on a connection of the Store,
		// which checked its own pool, and a probe would need a second
		// connection while this one is held (with every connection in
		// such transactions, a wait until the requests time out).
		got, found, err = l.payIn(ctx, tx, ref, keep, p)
	} else if err = l.check.Err(ctx); err == nil {
		got, found, err = l.payOwn(ctx, ref, keep, p)
	}
	if err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("pgledger: pay: %w", err)
	}
	return got, found, nil
}

// payIn pays in the caller's transaction.
func (l *Ledger) payIn(ctx context.Context, tx pgx.Tx, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	br := tx.SendBatch(ctx, l.payBatch(ref, keep, p, false))
	got, found, err := readPayBatch(br, p, false)
	if isUniqueViolation(err) {
		return mockserver.Payment{}, false, fmt.Errorf("a concurrent transaction recorded a payment under the ref; "+
			"this transaction is aborted and must be rolled back: %w", err)
	}
	return got, found, err
}

// payOwn pays in a transaction of its own. When a statement fails the
// server skips the rest of the batch, COMMIT included, and leaves the
// transaction aborted: payOwn rolls it back.
func (l *Ledger) payOwn(ctx context.Context, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return mockserver.Payment{}, false, err
	}
	// Release destroys a connection left inside a transaction, so that
	// even a failed ROLLBACK cannot hand one to the next user.
	defer conn.Release()

	got, found, err := readPayBatch(conn.SendBatch(ctx, l.payBatch(ref, keep, p, true)), p, true)
	if err == nil || errors.Is(err, mockserver.ErrInsufficientFunds) {
		return got, found, err
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		// No arguments: the simple protocol, which needs no prepared
		// statement (none can be prepared in an aborted transaction).
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			return mockserver.Payment{}, false, errors.Join(err, rerr)
		}
	}
	if !isUniqueViolation(err) {
		return mockserver.Payment{}, false, err
	}
	winner, ferr := scanPayment(conn.QueryRow(ctx, l.sql.byRef, ref))
	switch {
	case ferr == nil:
		return winner, true, nil
	case errors.Is(ferr, pgx.ErrNoRows): // not the ref: another payment has the ID
		return mockserver.Payment{}, false, err
	}
	return mockserver.Payment{}, false, errors.Join(err, ferr)
}

// payBatch queues Pay's statements: the advisory lock on ref, the retiring
// of a payment that no longer holds ref, and the pay statement, between
// BEGIN and COMMIT when own.
func (l *Ledger) payBatch(ref string, keep time.Duration, p mockserver.Payment, own bool) *pgx.Batch {
	b := &pgx.Batch{}
	if own {
		b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	}
	b.Queue(l.sql.lockRef, l.names.lock+"/ref/"+ref)
	var cutoff *time.Time // NULL: kept for good
	if keep > 0 {
		c := createdAt(p.Created).Add(-keep)
		cutoff = &c
	}
	b.Queue(l.sql.retire, ref, cutoff)
	b.Queue(l.sql.pay, ref, p.Currency, mockserver.OpeningBalance(l.opening, p.Currency), p.Amount,
		p.ID, p.IdempotencyKey, p.Recipient, p.Status, createdAt(p.Created))
	if own {
		b.Queue("COMMIT")
	}
	return b
}

// readPayBatch reads and closes the results of payBatch(..., own). No row
// from the pay statement means insufficient funds: it wrote nothing, so
// committing is the same as rolling back.
func readPayBatch(br pgx.BatchResults, p mockserver.Payment, own bool) (got mockserver.Payment, found bool, err error) {
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			got, found, err = mockserver.Payment{}, false, cerr
		}
	}()
	if own {
		if _, err := br.Exec(); err != nil {
			return mockserver.Payment{}, false, err
		}
	}
	for range 2 { // lockRef, retire
		if _, err := br.Exec(); err != nil {
			return mockserver.Payment{}, false, err
		}
	}
	var fresh bool
	got, err = scanPayment(br.QueryRow(), &fresh)
	short := errors.Is(err, pgx.ErrNoRows)
	if err != nil && !short {
		return mockserver.Payment{}, false, err
	}
	if own {
		tag, err := br.Exec()
		if err != nil {
			return mockserver.Payment{}, false, err
		}
		if tag.String() != "COMMIT" {
			return mockserver.Payment{}, false, fmt.Errorf("transaction not committed: %s", tag)
		}
	}
	if short {
		return mockserver.Payment{}, false, fmt.Errorf("%w: %s balance is below %d",
			mockserver.ErrInsufficientFunds, p.Currency, p.Amount)
	}
	return got, !fresh, nil
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateUniqueViolation
}
