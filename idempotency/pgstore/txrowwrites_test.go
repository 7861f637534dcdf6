package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
)

// TestTxHandlerWritesTheClaimRow: a handler that changes the claim's row
// itself through the request's transaction, in the transaction or in
// subtransactions (savepoints as SQL or pgx's, released or rolled back,
// more than the 64 that a backend's subtransaction cache holds), leaves a
// row that the transaction wrote (its xmin, the transaction's or one of
// its subtransactions'): the completion stores the outcome with the
// handler's writes kept. A row that it deleted, or whose token it
// changed, is no longer the claim: the commit fails with ErrStaleToken
// and nothing is kept. The cases run directly and through PgBouncer (see
// switchTargets).
func TestTxHandlerWritesTheClaimRow(t *testing.T) {
	nested := func(n int, end string) []string {
		var sqls []string
		for i := range n {
			sqls = append(sqls, fmt.Sprintf("SAVEPOINT s%d", i), fmt.Sprintf(`INSERT INTO $BIZ (id) VALUES ('nested-%d')`, i))
		}
		return append(sqls, "$UPDATE", end)
	}
	eachReleased := func(n int) []string {
		var sqls []string
		for i := range n {
			sqls = append(sqls, "SAVEPOINT s", fmt.Sprintf(`INSERT INTO $BIZ (id) VALUES ('each-%d')`, i), "$UPDATE", "RELEASE SAVEPOINT s")
		}
		return sqls
	}
	for _, c := range []rowWriteCase{
		{"UPDATE in the transaction", []string{"$UPDATE"}, false, 0},
		{"UPDATE in a released savepoint", []string{"SAVEPOINT a", "$UPDATE", "RELEASE SAVEPOINT a"}, false, 0},
		{"UPDATE in a savepoint rolled back", []string{"SAVEPOINT a", `INSERT INTO $BIZ (id) VALUES ('dropped')`, "$UPDATE", "ROLLBACK TO SAVEPOINT a", "RELEASE SAVEPOINT a"}, false, 0},
		{"UPDATE in a savepoint, again in the transaction", []string{"SAVEPOINT a", `INSERT INTO $BIZ (id) VALUES ('kept')`, "$UPDATE", "RELEASE SAVEPOINT a", "$UPDATE"}, false, 1},
		{"UPDATE in the 70th nested savepoint, released", nested(70, "RELEASE SAVEPOINT s0"), false, 70},
		{"UPDATE in the 70th nested savepoint, rolled back", nested(70, "ROLLBACK TO SAVEPOINT s0"), false, 0},
		{"UPDATE in each of 70 savepoints, released", eachReleased(70), false, 70},
		{"UPDATE in pgx's savepoint", []string{"$PGXSAVEPOINT"}, false, 0},
		{"DELETE in a released savepoint", []string{"SAVEPOINT a", "$DELETE", "RELEASE SAVEPOINT a"}, true, 0},
		{"DELETE in a savepoint rolled back", []string{"SAVEPOINT a", "$DELETE", "ROLLBACK TO SAVEPOINT a"}, false, 0},
		{"DELETE after 70 nested savepoints", nested(70, "$DELETE"), true, 0},
		{"token changed in a savepoint", []string{"SAVEPOINT a", "$NEWTOKEN", "RELEASE SAVEPOINT a"}, true, 0},
	} {
		for target, tg := range execTargets(t) {
			if !switchTargets[target] {
				continue
			}
			t.Run(c.name+"/"+target, func(t *testing.T) { testTxHandlerWritesTheClaimRow(t, tg, c) })
		}
	}
}

// rowWriteCase is a case of TestTxHandlerWritesTheClaimRow: the handler's
// statements, in which $BIZ is the business table and $UPDATE, $DELETE,
// $NEWTOKEN and $PGXSAVEPOINT stand for an update of the claim's row that
// changes nothing, its delete, an update of its token and the update in a
// savepoint of pgx's (pgx.Tx.Begin), committed.
type rowWriteCase struct {
	name  string
	sqls  []string
	stale bool // the commit fails with ErrStaleToken
	kept  int  // the business rows that a commit keeps
}

// testTxHandlerWritesTheClaimRow runs c on tg.
func testTxHandlerWritesTheClaimRow(t *testing.T, tg pgTarget, c rowWriteCase) {
	pool := tg.newPool(t)
	s := tg.txStore(t, pool)
	biz, ctx := bizTable(t, pool, s), ctxT(t)
	k := key("row-writes")
	tx, r, ptx := acquire(t, s, k)
	table, row := pgx.Identifier{s.Table()}.Sanitize(), ` WHERE key = '`+k.Key+`'`
	update := `UPDATE ` + table + ` SET fingerprint = fingerprint` + row
	stand := strings.NewReplacer("$BIZ", pgx.Identifier{biz}.Sanitize(), "$UPDATE", update,
		"$DELETE", `DELETE FROM `+table+row, "$NEWTOKEN", `UPDATE `+table+` SET token = token + 1`+row)
	for _, sql := range c.sqls {
		var err error
		if sql == "$PGXSAVEPOINT" {
			var sp pgx.Tx
			if sp, err = ptx.Begin(ctx); err == nil {
				if _, err = sp.Exec(ctx, update); err == nil {
					err = sp.Commit(ctx)
				}
			}
		} else {
			_, err = ptx.Exec(ctx, stand.Replace(sql))
		}
		if err != nil {
			t.Fatalf("%q: %v", sql, err)
		}
	}
	err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("made")}, time.Hour)
	if err == nil {
		err = tx.Commit(ctx)
	}
	e, found, gerr := s.Get(ctx, k)
	if gerr != nil {
		t.Fatal(gerr)
	}
	if c.stale {
		if !errors.Is(err, idempotency.ErrStaleToken) {
			t.Errorf("Complete and Commit = %v; want ErrStaleToken", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := bizRows(t, pool, biz); found || n != 0 {
			t.Errorf("after the failed commit: entry found=%v (%+v), %d business rows; want none", found, e, n)
		}
		return
	}
	if err != nil {
		t.Fatalf("Complete and Commit = %v; want nil", err)
	}
	if !found || e.State != idempotency.StateCompleted || e.Response.Status != 201 || string(e.Response.Body) != "made" {
		t.Errorf("the entry after the commit = found %v, %+v; want completed 201 made", found, e)
	}
	if n := bizRows(t, pool, biz); n != c.kept {
		t.Errorf("%d business rows after the commit; want %d", n, c.kept)
	}
}
