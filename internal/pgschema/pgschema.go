// Package pgschema applies a PostgreSQL schema script so that any number of
// processes may do it at once: the pgstore tables and the pgledger tables
// are created this way at start-up by every instance of a service.
package pgschema

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Split returns the schema ("" when there is none) and the table of name,
// "table" or "schema.table" (a name pgstore.ValidateTable accepts).
func Split(name string) (schema, table string) {
	if schema, table, ok := strings.Cut(name, "."); ok {
		return schema, table
	}
	return "", name
}

// Quote returns the quoted SQL name of the relation named after the table
// of name followed by suffix, in name's schema: "table_suffix", or
// "schema"."table_suffix" for a qualified name. name must be one that
// pgstore.ValidateTable accepts, which needs no escaping.
func Quote(name, suffix string) string {
	schema, table := Split(name)
	q := `"` + table + suffix + `"`
	if schema != "" {
		q = `"` + schema + `".` + q
	}
	return q
}

// LockTimeout bounds how long Apply waits for a lock on a table: an
// upgrade of a table under load fails with an error after it, and can be
// run again, rather than stall every query on the table.
const LockTimeout = "2s"

// Apply runs script (statements that are safe to run again, such as
// CREATE TABLE IF NOT EXISTS) in one transaction holding the advisory lock
// named lock, so that concurrent callers apply it one after the other
// rather than racing on the catalog.
func Apply(ctx context.Context, pool *pgxpool.Pool, lock, script string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lock); err != nil {
		return err
	}
	// A change that must lock a busy table (an upgrade adding a column)
	// gives up rather than queue: while it waits for the transactions
	// open on the table, every new statement on it waits behind it.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+LockTimeout+`'`); err != nil {
		return err
	}
	// No arguments: pgx sends the multi-statement script over the simple
	// protocol.
	if _, err := tx.Exec(ctx, script); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
