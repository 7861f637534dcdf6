package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTableInASystemSchemaRefused: table names in schemas PostgreSQL
// reserves (the "pg_" prefix, which CREATE SCHEMA refuses) are rejected:
// "pg_temp.entries" passes as a lowercase identifier, but pg_temp is each
// session's own temporary schema, so every connection, and every instance,
// would claim in a table of its own and run the same key each once. Two
// instances on pools of their own (one connection each) show it when the
// name is accepted.
func TestTableInASystemSchemaRefused(t *testing.T) {
	name := "pg_temp.entries"
	if err := pgstore.ValidateTable(name); err != nil {
		if !errors.Is(err, pgstore.ErrInvalidTable) {
			t.Fatalf("ValidateTable(%q) = %v, not ErrInvalidTable", name, err)
		}
		if _, err := pgstore.Schema(name); !errors.Is(err, pgstore.ErrInvalidTable) {
			t.Fatalf("Schema(%q) = %v, want ErrInvalidTable", name, err)
		}
		return
	}
	ctx := ctxT(t)
	k := key("temp")
	var acquired []int64
	for range 2 {
		pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
		s := pgstore.New(pool, pgstore.WithTable(name))
		t.Cleanup(func() { _ = s.Close() })
		if err := s.CreateSchema(ctx); err != nil {
			t.Fatalf("CreateSchema(%q) succeeded in ValidateTable but failed: %v", name, err)
		}
		if r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); err == nil && r.Acquired {
			acquired = append(acquired, r.Token)
		}
	}
	t.Fatalf("ValidateTable accepts %q, and two instances both acquired the same key (tokens %v): the table is per session", name, acquired)
}
