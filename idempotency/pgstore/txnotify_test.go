package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxCompletionNotifiesOnCommitOnly: transactional mode's completion
// of a watched entry (a claim that took over a lapsed lease-mode claim
// that a waiter marked) sends its notification, on the store's channel
// with the entry's payload, once its transaction commits; a completion
// whose COMMIT fails (a deferred constraint of the handler's writes) and
// a completed claim rolled back send none, and neither does the
// completion of an entry nobody watched. A raw LISTEN connection reads
// them in commit order between two notifications of the test's own.
func TestTxCompletionNotifiesOnCommitOnly(t *testing.T) {
	pool := newPool(t)
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	k, unwatched := key("notify"), key("notify-unwatched")
	channel, payload := pgstore.Notification(s.Store, k)
	listener, err := pgx.Connect(ctx, pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	deferred := s.Table() + "_deferred"
	if _, err := pool.Exec(ctx, `CREATE TABLE "`+deferred+`" (id text UNIQUE DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+deferred+`"`) })

	// A lease-mode claim, committed in progress, marked as watched, whose
	// lease lapsed: the next claim takes it over, watched.
	if r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
		t.Fatalf("lease-mode Claim = %+v, %v", r, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+pgx.Identifier{s.Table()}.Sanitize()+`
		SET watched = true, lease_until = statement_timestamp() - interval '1 second' WHERE key = $1`, k.Key); err != nil {
		t.Fatal(err)
	}
	complete := func(k idempotency.Key, handler func(pgx.Tx)) idempotency.Tx {
		t.Helper()
		tx, r, ptx := acquire(t, s, k)
		handler(ptx)
		if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	none := func(pgx.Tx) {}
	// Its COMMIT fails: the handler inserted the same id twice.
	tx := complete(k, func(ptx pgx.Tx) {
		if _, err := ptx.Exec(ctx, `INSERT INTO "`+deferred+`" (id) VALUES ('twice'), ('twice')`); err != nil {
			t.Fatal(err)
		}
	})
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("Commit with a deferred unique violation succeeded")
	}
	_ = tx.Rollback(ctx)
	// Completed, then rolled back.
	if err := complete(k, none).Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	notifyTest := func(p string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, p); err != nil {
			t.Fatal(err)
		}
	}
	notifyTest("before")
	if err := complete(k, none).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := complete(unwatched, none).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	notifyTest("after")
	for _, want := range []string{"before", payload, "after"} {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		if n.Channel != channel || n.Payload != want {
			t.Fatalf("notification %q on %q; want %q on %q", n.Payload, n.Channel, want, channel)
		}
	}
}
