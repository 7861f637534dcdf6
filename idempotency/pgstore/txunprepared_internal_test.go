package pgstore

import (
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestDeallocatedName checks the names that a DEALLOCATE of one statement
// drops, as PostgreSQL reads them, and the statements whose name it does
// not read, after which every prepared statement is forgotten (see
// forgetPrepared).
func TestDeallocatedName(t *testing.T) {
	for sql, want := range map[string]string{
		"DEALLOCATE one":                "one",
		"deallocate prepare One;":       "one",
		`DEALLOCATE "Mixed ""Quoted"""`: `Mixed "Quoted"`,
		"/* c */ DEALLOCATE\n\tx_1 ; ":  "x_1",
		"DEALLOCATE prepare":            "prepare",
		"DEALLOCATE a; DEALLOCATE b":    "",
		"DEALLOCATE ALL":                "all", // its tag tells it apart
		`DEALLOCATE U&"d\0061t"`:        "",
		`DEALLOCATE "unterminated`:      "",
		"DEALLOCATE a123456789012345678901234567890123456789012345678901234567890123": "",
		"SELECT 1": "",
	} {
		if got := deallocatedName(sql); got != want {
			t.Errorf("deallocatedName(%q) = %q, want %q", sql, got, want)
		}
	}
}

// TestPgxStatementName checks that pgxStatementName is the name under which
// pgx prepares a statement under its own text (see forgetOne, which finds
// the Tx's own statements by it): with another, a handler's DEALLOCATE of
// one of them would forget every prepared statement of the connection.
func TestPgxStatementName(t *testing.T) {
	pool := testenv.PostgresPoolAt(t, testenv.PostgresURL(t))
	s := NewTx(pool, WithTable(testenv.PostgresTable(t, pool, "pgstore_stmtname_")))
	defer s.Close()
	if err := s.CreateSchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for name, sql := range s.statementNames {
		sd, err := conn.Conn().Prepare(t.Context(), sql, sql)
		if err != nil {
			t.Fatal(err)
		}
		if sd.Name != name {
			t.Errorf("pgx prepared %.40q... as %s; pgxStatementName is %s", sql, sd.Name, name)
		}
	}
}
