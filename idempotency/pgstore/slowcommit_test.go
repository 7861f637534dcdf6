package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// slowCommits makes each COMMIT of a transaction that inserted into the
// business table biz take sleep seconds, through a deferred trigger that
// goes on for afterCancel seconds more when pgx's cancel request comes (it
// sends one as it closes the connection of a statement cut short by its
// context): a COMMIT cut short then commits afterCancel seconds after the
// cancel, as one whose cancel came too late would. A cancel that comes
// before the trigger runs (a loaded machine) still rolls the COMMIT back.
func slowCommits(t *testing.T, pool *pgxpool.Pool, biz string, sleep, afterCancel float64) {
	t.Helper()
	fn := biz + "_slow"
	for _, sql := range []string{
		fmt.Sprintf(`CREATE FUNCTION "%s"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN BEGIN PERFORM pg_sleep(%g); EXCEPTION WHEN query_canceled THEN PERFORM pg_sleep(%g); END; RETURN NULL; END $$`, fn, sleep, afterCancel),
		`CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON "` + biz + `" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "` + fn + `"()`,
	} {
		if _, err := pool.Exec(ctxT(t), sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP FUNCTION IF EXISTS "`+fn+`" CASCADE`) })
}
