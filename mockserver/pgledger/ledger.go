package pgledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/mockserver"
)

var _ mockserver.TxLedger = (*Ledger)(nil)

// Ledger is a mockserver.TxLedger kept in two PostgreSQL tables: Ledgers
// with the same table name over the same database, in any number of
// processes, share their payments and balances. Create it with New; the
// zero value is not usable. It is safe for concurrent use by multiple
// goroutines and processes. Most callers call CreateSchema at start-up (or
// apply Schema with their migration tool) and hand it to
// mockserver.WithLedger; Pay is the method that matters.
type Ledger struct {
	pool    *pgxpool.Pool
	names   names
	sql     statements
	opening map[string]int64
	check   *pgstore.PoolCheck
}

// Option configures a Ledger in New; a nil Option is ignored. Options are
// plain functions, safe to share and to use from several goroutines at
// once.
type Option func(*config)

type config struct {
	pooler pgstore.Pooler
}

// WithPooler declares what sits between the pool and PostgreSQL, as
// pgstore.WithPooler does for a Store; the default, pgstore.PoolerDetect,
// detects a pooler. Behind a transaction pooler (PgBouncer's
// pool_mode=transaction) the pool's default exec mode, the statement
// cache, fails with `prepared statement "stmtcache_..." already exists`,
// and pgx.QueryExecModeDescribeExec may run another client's statement:
// in those modes the Ledger looks for a pooler once, before its first
// statement, and behind one every method returns a *pgstore.ExecModeError
// instead of running a statement. Use pgx.QueryExecModeExec
// (default_query_exec_mode=exec in the URL) or
// pgx.QueryExecModeSimpleProtocol there, or declare PgBouncer 1.21 or
// later with max_prepared_statements set as
// pgstore.PoolerTransactionPrepared.
func WithPooler(p pgstore.Pooler) Option {
	return func(c *config) { c.pooler = p }
}

// statements are the SQL texts, built once with the table names.
type statements struct {
	lockRef, retire, pay, byRef, byID, payments, balances, balance, reset string
}

// paymentColumns are the columns that make a mockserver.Payment, in the
// order scanPayment reads them.
const paymentColumns = `id, ref, idempotency_key, amount, currency, recipient, status, created`

func buildStatements(n names) statements {
	p, b := n.payments, n.balances
	return statements{
		lockRef: `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
		// $1 ref, $2 cutoff (NULL when the ref is kept for good). A payment
		// created at or before the cutoff no longer holds the ref (see
		// mockserver.Ledger.Pay): its ref gets the suffix "/lapsed/" and
		// its ID, unique as the ID, so that the ref column stays unique and
		// still finds, and races on, the one payment that ref names. It
		// runs after lockRef, and before pay in a statement of its own so
		// that pay's snapshot sees the ref free.
		retire: `UPDATE ` + p + ` SET ref = ref || '/lapsed/' || id WHERE ref = $1::text AND created <= $2::timestamptz`,
		// $1 ref, $2 currency, $3 opening balance, $4 amount, $5 id,
		// $6 idempotency key, $7 recipient, $8 status, $9 created.
		//
		// Every part reads the snapshot the statement started with, taken
		// after lockRef. prior is the payment under the ref, if any; only
		// without one does debit run: an upsert that inserts the currency's
		// row from its opening balance or updates the row, either only if
		// the balance covers the amount. The opening balance counts only
		// when the snapshot has no row, so a refused payment inserts none.
		// ins records the payment only if debit returned a row; a payment
		// under the ref committed after the snapshot makes it violate the
		// unique constraint, which aborts the statement, debit included.
		// No row means insufficient funds.
		pay: `WITH prior AS (
	SELECT ` + paymentColumns + ` FROM ` + p + ` WHERE ref = $1::text
), debit AS (
	INSERT INTO ` + b + ` AS b (currency, balance)
	SELECT $2::text, $3::bigint - $4::bigint
	WHERE NOT EXISTS (SELECT FROM prior)
		AND ($3::bigint >= $4::bigint OR EXISTS (SELECT FROM ` + b + ` WHERE currency = $2::text))
	ON CONFLICT (currency) DO UPDATE SET balance = b.balance - $4::bigint
		WHERE b.balance >= $4::bigint
	RETURNING balance
), ins AS (
	INSERT INTO ` + p + ` (` + paymentColumns + `)
	SELECT $5::text, $1::text, $6::text, $4::bigint, $2::text, $7::text, $8::text, $9::timestamptz FROM debit
	RETURNING ` + paymentColumns + `
)
SELECT true, ` + paymentColumns + ` FROM ins
UNION ALL
SELECT false, ` + paymentColumns + ` FROM prior`,
		byRef:    `SELECT ` + paymentColumns + ` FROM ` + p + ` WHERE ref = $1`,
		byID:     `SELECT ` + paymentColumns + ` FROM ` + p + ` WHERE id = $1`,
		payments: `SELECT ` + paymentColumns + ` FROM ` + p + ` ORDER BY seq`,
		balances: `SELECT currency, balance FROM ` + b,
		balance:  `SELECT balance FROM ` + b + ` WHERE currency = $1`,
		// TRUNCATE takes both tables' exclusive locks, in the order Pay
		// takes its own, so a Reset never lands inside a payment.
		reset: `TRUNCATE ` + p + `, ` + b,
	}
}

// New returns a Ledger over pool, which must not be nil, in the tables
// table_payments and table_balances. table is a name pgstore.WithTable
// accepts (see pgstore.ValidateTable), for example the pgstore table's own,
// so that ledger and store sit side by side. opening holds the opening
// balances, in minor units, by currency; a nil map, or a currency missing
// from it, opens at mockserver.DefaultBalance. New copies opening; every
// process over the same tables must pass the same. New does not touch the
// database (call CreateSchema, or apply Schema, before use) and does not
// close pool. Like a pgstore.Store, it refuses the exec modes that a
// connection pooler in front of PostgreSQL breaks (see WithPooler). It
// panics when pool is nil or table is invalid: both are programming
// errors.
func New(pool *pgxpool.Pool, table string, opening map[string]int64, opts ...Option) *Ledger {
	if pool == nil {
		panic("pgledger: New called with a nil pool")
	}
	n, err := newNames(table)
	if err != nil {
		panic("pgledger: New: " + err.Error())
	}
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return &Ledger{pool: pool, names: n, sql: buildStatements(n), opening: maps.Clone(opening),
		check: pgstore.NewPoolCheck(pool, cfg.pooler)}
}

// JoinsTransactions implements mockserver.TxLedger: Pay writes through the
// transaction of pgstore.TxFromContext.
func (l *Ledger) JoinsTransactions() {}

// Payments implements mockserver.Ledger in one round trip, ordered by seq.
func (l *Ledger) Payments(ctx context.Context) ([]mockserver.Payment, error) {
	if err := l.check.Err(ctx); err != nil {
		return nil, fmt.Errorf("pgledger: payments: %w", err)
	}
	rows, err := l.pool.Query(ctx, l.sql.payments)
	if err != nil {
		return nil, fmt.Errorf("pgledger: payments: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (mockserver.Payment, error) {
		return scanPayment(row)
	})
	if err != nil {
		return nil, fmt.Errorf("pgledger: payments: %w", err)
	}
	return ps, nil
}

// Payment implements mockserver.Ledger in one round trip.
func (l *Ledger) Payment(ctx context.Context, id string) (mockserver.Payment, bool, error) {
	if err := l.check.Err(ctx); err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("pgledger: payment: %w", err)
	}
	p, err := scanPayment(l.pool.QueryRow(ctx, l.sql.byID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return mockserver.Payment{}, false, nil
	}
	if err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("pgledger: payment: %w", err)
	}
	return p, true, nil
}

// Balances implements mockserver.Ledger in one round trip: the stored
// balance of every currency paid in, and the opening balance of every other
// currency given one.
func (l *Ledger) Balances(ctx context.Context) (map[string]int64, error) {
	if err := l.check.Err(ctx); err != nil {
		return nil, fmt.Errorf("pgledger: balances: %w", err)
	}
	rows, err := l.pool.Query(ctx, l.sql.balances)
	if err != nil {
		return nil, fmt.Errorf("pgledger: balances: %w", err)
	}
	bals := maps.Clone(l.opening)
	if bals == nil {
		bals = make(map[string]int64)
	}
	var (
		currency string
		balance  int64
	)
	_, err = pgx.ForEachRow(rows, []any{&currency, &balance}, func() error {
		bals[currency] = balance
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgledger: balances: %w", err)
	}
	return bals, nil
}

// Balance implements mockserver.Ledger in one round trip.
func (l *Ledger) Balance(ctx context.Context, currency string) (int64, error) {
	if err := l.check.Err(ctx); err != nil {
		return 0, fmt.Errorf("pgledger: balance: %w", err)
	}
	var b int64
	err := l.pool.QueryRow(ctx, l.sql.balance, currency).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return mockserver.OpeningBalance(l.opening, currency), nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgledger: balance: %w", err)
	}
	return b, nil
}

// Reset implements mockserver.Ledger with one TRUNCATE of both tables. It
// waits for the payments in flight, transactional mode's uncommitted ones
// included, and they wait for it.
func (l *Ledger) Reset(ctx context.Context) error {
	if err := l.check.Err(ctx); err != nil {
		return fmt.Errorf("pgledger: reset: %w", err)
	}
	if _, err := l.pool.Exec(ctx, l.sql.reset); err != nil {
		return fmt.Errorf("pgledger: reset: %w", err)
	}
	return nil
}

// scanPayment reads the paymentColumns of row.
func scanPayment(row pgx.Row, before ...any) (mockserver.Payment, error) {
	var p mockserver.Payment
	dest := append(before, &p.ID, &p.Ref, &p.IdempotencyKey, &p.Amount, &p.Currency, &p.Recipient, &p.Status, &p.Created)
	if err := row.Scan(dest...); err != nil {
		return mockserver.Payment{}, err
	}
	p.Created = p.Created.UTC()
	return p, nil
}

// createdAt is the Created a payment is stored with: UTC, to the
// millisecond, as the Server makes it.
func createdAt(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
