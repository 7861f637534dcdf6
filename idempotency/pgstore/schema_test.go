package pgstore_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestCreateSchemaLeavesABusyTableAlone checks that CreateSchema on a table
// that is up to date takes no lock on it: with a transaction open on the
// table (a claim in transactional mode, say), it returns at once instead of
// queueing behind that transaction, with every later claim queued behind
// it in turn.
func TestCreateSchemaLeavesABusyTableAlone(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	ctx := ctxT(t)
	busy := testenv.PostgresTx(t, pool)
	if _, err := busy.Exec(ctx, `INSERT INTO "`+s.Table()+`" (scope, key, state, fingerprint, expires_at) VALUES ('', 'busy', 1, 'fp', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	// Well under pgschema's lock timeout: a CreateSchema that waited for
	// the lock would fail here, not pass late.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.CreateSchema(short); err != nil {
		t.Fatalf("CreateSchema beside an open transaction: %v", err)
	}
}

// TestCreateSchemaUpgradesAnOlderTable checks that a table in the layout of
// an earlier version (no header_bin, no watched, no expiry index, the
// default fill factor) gains what it lacks, and that the store then works
// on it.
func TestCreateSchemaUpgradesAnOlderTable(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	table := s.Table()
	ctx := ctxT(t)
	// The earlier layout is this version's table less every column that
	// earlierColumns does not name: header_bin, watched, and any column a
	// later change adds to Schema, which the upgrade must then add too. The
	// columns left must be the earlier version's, type for type.
	current := columns(t, pool, table)
	for _, c := range current {
		if name, _, _ := strings.Cut(c, " "); !isEarlierName(name) {
			if _, err := pool.Exec(ctx, `ALTER TABLE "`+table+`" DROP COLUMN "`+name+`"`); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := strings.Join(columns(t, pool, table), ", "); got != earlierColumns {
		t.Fatalf("Schema changed a column of the earlier layout, which the upgrade would have to change too:\n got %s\nwant %s", got, earlierColumns)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE "`+table+`" RESET (fillfactor)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DROP INDEX "`+table+`_expires_at_idx"`); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second finds nothing to do
		if err := s.CreateSchema(ctx); err != nil {
			t.Fatalf("CreateSchema on the older table: %v", err)
		}
	}
	var cols, idx int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = $1 AND column_name IN ('header_bin', 'watched')`, table).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = $1 AND indexname = $2`, table, table+"_expires_at_idx").Scan(&idx); err != nil {
		t.Fatal(err)
	}
	if cols != 2 || idx != 1 {
		t.Fatalf("after the upgrade: %d of the 2 new columns, %d expiry index", cols, idx)
	}
	if got := columns(t, pool, table); !sameColumns(got, current) {
		t.Fatalf("after the upgrade the columns are %q, want those of Schema's table, %q", got, current)
	}
	var options string
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class WHERE oid = $1::text::regclass`, `"`+table+`"`).Scan(&options); err != nil {
		t.Fatal(err)
	}
	if options != "fillfactor=80" {
		t.Fatalf("after the upgrade the table's options are %q, want fillfactor=80", options)
	}
	r, err := s.Claim(ctx, key("up"), "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	resp := idempotency.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/x"}}, Body: []byte("ok")}
	if err := s.Complete(ctx, key("up"), r.Token, resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	e, found, err := s.Get(ctx, key("up"))
	if err != nil || !found || e.Response == nil || e.Response.Header.Get("Location") != "/x" || string(e.Response.Body) != "ok" {
		t.Fatalf("Get on the upgraded table = %+v %v %v", e, found, err)
	}
}

// TestRecordCompletedByAnEarlierVersion checks a rolling upgrade: a key
// completed by this version expires, and an instance of an earlier version
// (which knows only the JSON header column, and leaves header_bin as it
// was) claims and completes it again. Readers of this version then replay
// that record's headers, not the ones left over from the expired record.
func TestRecordCompletedByAnEarlierVersion(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	ctx := ctxT(t)
	r, err := s.Claim(ctx, key("k"), "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	resp := idempotency.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/ops/1"}}}
	if err := s.Complete(ctx, key("k"), r.Token, resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, header, want string
	}{
		{"with headers", `'{"Location":["/ops/2"]}'`, "/ops/2"},
		{"without headers", `NULL`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// What an earlier version's claim and completion leave: a new
			// token, the JSON header, header_bin untouched.
			tag, err := pool.Exec(ctx, `UPDATE "`+s.Table()+`" SET token = token + 1, header = `+tt.header+` WHERE key = $1`, key("k").Key)
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatal(tag, err)
			}
			e, found, err := s.Get(ctx, key("k"))
			if err != nil || !found || e.Response == nil {
				t.Fatalf("Get = %+v %v %v", e, found, err)
			}
			if got := e.Response.Header.Get("Location"); got != tt.want {
				t.Fatalf("Location = %q, want %q (the earlier version's record)", got, tt.want)
			}
		})
	}
}

// earlierColumns are the columns of the table an earlier version created
// (before header_bin and watched), in order, as columns lists them: the
// layout that TestCreateSchemaUpgradesAnOlderTable upgrades.
const earlierColumns = "scope text NOT NULL, key text NOT NULL, state smallint NOT NULL, fingerprint text NOT NULL, " +
	"token bigint NOT NULL, took_over boolean NOT NULL, lease_until timestamp with time zone, " +
	"expires_at timestamp with time zone NOT NULL, status integer, header jsonb, body bytea, oversize boolean NOT NULL"

// isEarlierName reports whether earlierColumns has a column called name.
func isEarlierName(name string) bool {
	for _, c := range strings.Split(earlierColumns, ", ") {
		if n, _, _ := strings.Cut(c, " "); n == name {
			return true
		}
	}
	return false
}

// columns lists table's columns in order, each as its name, its type and
// NOT NULL if it has that constraint.
func columns(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, err := pool.Query(ctxT(t), `SELECT column_name || ' ' || data_type || CASE is_nullable WHEN 'NO' THEN ' NOT NULL' ELSE '' END
		FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// sameColumns reports whether a and b list the same columns, in any order
// (an upgrade appends the columns it adds).
func sameColumns(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
