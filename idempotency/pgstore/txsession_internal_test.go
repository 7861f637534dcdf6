package pgstore

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestSetsSession checks which statements of a handler make its Tx close
// the connection (see setsSession): a SET or RESET other than SET LOCAL,
// SET TRANSACTION and SET CONSTRAINTS, by tag or first word, and any query string of
// several statements with one.
func TestSetsSession(t *testing.T) {
	set, reset, sel := pgconn.NewCommandTag("SET"), pgconn.NewCommandTag("RESET"), pgconn.NewCommandTag("SELECT 1")
	for _, c := range []struct {
		tag  pgconn.CommandTag
		sql  string
		want bool
	}{
		{set, "SET statement_timeout = '1s'", true},
		{set, "set session search_path = public", true},
		{set, "SET ROLE someone", true},
		{set, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", true},
		{reset, "RESET ALL", true},
		{set, "/* why */ SET search_path = public", true},
		{set, "SELECT 1; SET search_path = public", true},
		{set, "SET LOCAL statement_timeout = '1s'", false},
		{set, "  -- bounded\n set local lock_timeout = 5;", false},
		{set, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", false},
		{set, "SET LOCAL a.b = 1; SET c.d = 2", true},
		{pgconn.CommandTag{}, "SET search_path = public", true}, // in a batch
		{pgconn.CommandTag{}, "SET LOCAL search_path = public", false},
		{pgconn.CommandTag{}, "UPDATE t SET x = 1", false},
		{sel, "SET search_path = public; SELECT 1", true},
		{sel, "SELECT 1; SET search_path = public; SELECT 2", true},
		{sel, "SELECT 1;\n/* c */ reset ALL; SELECT 2", true},
		{sel, "SELECT 1; SET LOCAL search_path = public; SELECT 2", false},
		{pgconn.CommandTag{}, "SELECT 1; SET search_path = public; SELECT 2", true}, // in a batch
		{sel, "SELECT set_config('a.b', '1', true)", false},
		{pgconn.NewCommandTag("SET CONSTRAINTS"), "SET CONSTRAINTS ALL DEFERRED", false},
	} {
		if got := setsSession(c.tag, c.sql); got != c.want {
			t.Errorf("setsSession(%q, %q) = %v, want %v", c.tag, c.sql, got, c.want)
		}
	}
}

// TestSetsSessionAllocates: setsSession, asked of every statement of a
// handler, allocated twice for one in upper case (the lower-case copies
// of its first two words), though it reads nothing of them but whether
// they are SET or RESET.
func TestSetsSessionAllocates(t *testing.T) {
	tag := pgconn.NewCommandTag("INSERT 0 1")
	if n := testing.AllocsPerRun(100, func() {
		setsSession(tag, "INSERT INTO payments (id, amount) VALUES ($1, $2)")
	}); n != 0 {
		t.Errorf("setsSession allocates %v times a statement; want 0", n)
	}
}
