package pgledger

import (
	"context"
	"fmt"

	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/pgschema"
)

// names holds the quoted SQL names derived from a valid table name.
type names struct {
	payments string // quoted, possibly schema-qualified
	balances string
	lock     string // key of the advisory lock that serialises CreateSchema
	schema   string // the script of Schema and CreateSchema
}

// newNames derives the names of table's tables. table is validated with
// pgstore.ValidateTable, whose 48-byte limit keeps every name PostgreSQL
// derives from ours (T_payments_pkey, T_balances_pkey) within its 63 bytes.
// It returns the zero names with the error of an invalid table.
func newNames(table string) (names, error) {
	if err := pgstore.ValidateTable(table); err != nil {
		return names{}, err
	}
	n := names{
		payments: pgschema.Quote(table, "_payments"),
		balances: pgschema.Quote(table, "_balances"),
		lock:     "saferetry/pgledger/" + table,
	}
	n.schema = schemaSQL(n)
	return n, nil
}

// Schema returns the SQL that creates the tables of the ledger named table
// (see New), for migration tools. Every statement uses IF NOT EXISTS, so
// the SQL is safe to run again. It returns an error wrapping
// pgstore.ErrInvalidTable for an invalid name.
//
// Columns of T_payments: the fields of mockserver.Payment (created to the
// millisecond, as the Server makes it), ref unique, and seq, an identity
// that orders the payments. T_balances holds a balance in minor units per
// currency.
func Schema(table string) (string, error) {
	n, err := newNames(table)
	return n.schema, err
}

func schemaSQL(n names) string {
	return `CREATE TABLE IF NOT EXISTS ` + n.payments + ` (
	id              text        PRIMARY KEY,
	ref             text        NOT NULL UNIQUE,
	idempotency_key text        NOT NULL,
	amount          bigint      NOT NULL CHECK (amount > 0),
	currency        text        NOT NULL,
	recipient       text        NOT NULL,
	status          text        NOT NULL,
	created         timestamptz NOT NULL,
	seq             bigint      GENERATED ALWAYS AS IDENTITY
);
CREATE TABLE IF NOT EXISTS ` + n.balances + ` (
	currency text   PRIMARY KEY,
	balance  bigint NOT NULL
);
`
}

// CreateSchema creates the ledger's tables if they do not exist (see
// Schema); a schema-qualified name needs its schema to exist. It is safe to
// call repeatedly, and concurrently from several processes: a
// transaction-scoped advisory lock serialises the DDL.
func (l *Ledger) CreateSchema(ctx context.Context) error {
	if err := l.check.Err(ctx); err != nil {
		return fmt.Errorf("pgledger: create schema: %w", err)
	}
	if err := pgschema.Apply(ctx, l.pool, l.names.lock, l.names.schema); err != nil {
		return fmt.Errorf("pgledger: create schema: %w", err)
	}
	return nil
}

// DropSchema drops the ledger's tables and every payment in them, if they
// exist: for tests and clean-up.
func (l *Ledger) DropSchema(ctx context.Context) error {
	if err := l.check.Err(ctx); err != nil {
		return fmt.Errorf("pgledger: drop schema: %w", err)
	}
	if _, err := l.pool.Exec(ctx, `DROP TABLE IF EXISTS `+l.names.payments+`, `+l.names.balances); err != nil {
		return fmt.Errorf("pgledger: drop schema: %w", err)
	}
	return nil
}
