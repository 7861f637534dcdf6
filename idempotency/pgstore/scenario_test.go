package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
)

// scenarioPool has room for the scenarios' fan-out: in transactional mode
// every request in flight holds a connection.
func scenarioPool(t *testing.T) *pgxpool.Pool {
	return newPool(t, func(c *pgxpool.Config) { c.MaxConns = 16 })
}

func TestScenarioExactlyOnceLease(t *testing.T) {
	scenario.ExactlyOnce(t, newStore(t, nil))
}

func TestScenarioExactlyOnceTx(t *testing.T) {
	scenario.ExactlyOnce(t, newTxStore(t, scenarioPool(t)))
}

func TestScenarioLedgerLease(t *testing.T) {
	pool := scenarioPool(t)
	s := newTxStore(t, pool).Store // the lease-mode Store over the same table
	scenario.Ledger(t, s, newPgBook(t, pool, s.Table()))
}

func TestScenarioLedgerTx(t *testing.T) {
	pool := scenarioPool(t)
	s := newTxStore(t, pool)
	book := newPgBook(t, pool, s.Table())
	book.requireTx = true
	scenario.Ledger(t, s, book)
}

func TestScenarioKeyReusedLease(t *testing.T) {
	scenario.KeyReused(t, newStore(t, nil))
}

func TestScenarioKeyReusedTx(t *testing.T) {
	scenario.KeyReused(t, newTxStore(t, scenarioPool(t)))
}

func TestScenarioCrashLease(t *testing.T) {
	scenario.Crash(t, newStore(t, nil), scenario.CrashLease)
}

func TestScenarioCrashTx(t *testing.T) {
	scenario.Crash(t, newTxStore(t, scenarioPool(t)), scenario.CrashLease)
}

// pgBook is a scenario.Book in a PostgreSQL table. A debit goes through the
// transaction the Middleware handed over when there is one, so that in
// transactional mode it commits or rolls back with the idempotency record.
type pgBook struct {
	pool      *pgxpool.Pool
	table     string
	requireTx bool
	t         *testing.T
}

var _ scenario.Book = (*pgBook)(nil)

func newPgBook(t *testing.T, pool *pgxpool.Pool, storeTable string) *pgBook {
	t.Helper()
	name := storeTable + "_balances"
	if _, err := pool.Exec(ctxT(t), `CREATE TABLE "`+name+`" (account text PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+name+`"`) })
	return &pgBook{pool: pool, table: name, t: t}
}

func (b *pgBook) Debit(ctx context.Context, account string, amount int64) error {
	q := `INSERT INTO "` + b.table + `" AS b (account, balance) VALUES ($1, -$2::bigint)
		ON CONFLICT (account) DO UPDATE SET balance = b.balance - $2::bigint`
	if tx, ok := pgstore.TxFromContext(ctx); ok {
		_, err := tx.Exec(ctx, q, account, amount)
		return err
	}
	if b.requireTx {
		b.t.Errorf("Debit of %s without the handed-over transaction", account)
	}
	_, err := b.pool.Exec(ctx, q, account, amount)
	return err
}

func (b *pgBook) Balances(ctx context.Context) (map[string]int64, error) {
	rows, err := b.pool.Query(ctx, `SELECT account, balance FROM "`+b.table+`"`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var a string
		var v int64
		if err := rows.Scan(&a, &v); err != nil {
			return nil, err
		}
		m[a] = v
	}
	return m, rows.Err()
}

var _ idempotency.TxStore = (*pgstore.TxStore)(nil)
