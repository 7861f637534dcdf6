package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// newInbox returns an Inbox and an effects table, both of the test's own.
func newInbox(t *testing.T) (*outbox.Inbox, *pgxpool.Pool, string) {
	t.Helper()
	pool := testenv.PostgresPool(t)
	in := outbox.NewInbox(pool, outbox.WithTable(testenv.PostgresTable(t, pool, "inbox_test_")))
	if err := in.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	effects := testenv.PostgresTable(t, pool, "inbox_test_effects_")
	if _, err := pool.Exec(context.Background(), `CREATE TABLE "`+effects+`" (message_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return in, pool, `"` + effects + `"`
}

func effectsOf(t *testing.T, pool *pgxpool.Pool, effects, id string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+effects+` WHERE message_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInboxConcurrentDuplicates: one message delivered to two instances of
// a consumer at once (the first still in its transaction when the second
// arrives): the effect is committed once, one delivery says duplicate.
func TestInboxConcurrentDuplicates(t *testing.T) {
	in, pool, effects := newInbox(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var runs, dups int
	entered := make(chan struct{}, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dup, err := in.Process(ctx, "mailer", "m-1", func(ctx context.Context, tx pgx.Tx) error {
				entered <- struct{}{}
				time.Sleep(50 * time.Millisecond) // the other delivery arrives meanwhile
				_, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ('m-1')`)
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("Process: %v", err)
			}
			if dup {
				dups++
			} else {
				runs++
			}
		}()
	}
	wg.Wait()
	if runs != 1 || dups != 1 || len(entered) != 1 {
		t.Errorf("%d runs, %d duplicates, fn entered %d times; want 1, 1, 1", runs, dups, len(entered))
	}
	if n := effectsOf(t, pool, effects, "m-1"); n != 1 {
		t.Errorf("%d effects committed, want 1", n)
	}
	// Another consumer is not a duplicate.
	if dup, err := in.Process(ctx, "audit", "m-1", func(context.Context, pgx.Tx) error { return nil }); dup || err != nil {
		t.Errorf("another consumer: Process = %v, %v; want a first run", dup, err)
	}
}

// TestInboxErrorThenRedelivery: fn's error rolls back its effect and the
// inbox row, so the redelivery runs it again, and the one after that is a
// duplicate: committed once.
func TestInboxErrorThenRedelivery(t *testing.T) {
	in, pool, effects := newInbox(t)
	ctx := context.Background()
	boom := errors.New("smtp down")
	fn := func(fail bool) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ('m-2')`); err != nil {
				return err
			}
			if fail {
				return boom
			}
			return nil
		}
	}
	if dup, err := in.Process(ctx, "mailer", "m-2", fn(true)); dup || !errors.Is(err, boom) {
		t.Fatalf("failing delivery: Process = %v, %v; want the handler's error", dup, err)
	}
	if dup, err := in.Process(ctx, "mailer", "m-2", fn(false)); dup || err != nil {
		t.Fatalf("redelivery: Process = %v, %v; want a run", dup, err)
	}
	if dup, err := in.Process(ctx, "mailer", "m-2", fn(false)); !dup || err != nil {
		t.Fatalf("third delivery: Process = %v, %v; want a duplicate", dup, err)
	}
	if n := effectsOf(t, pool, effects, "m-2"); n != 1 {
		t.Errorf("%d effects committed, want 1", n)
	}
	if n, err := in.DeleteProcessed(ctx, time.Hour, 0); err != nil || n != 0 {
		t.Errorf("DeleteProcessed(1h) = %d, %v; want nothing that young", n, err)
	}
}

// TestDeleteRefusesAgeOfZeroOrLess: DeleteProcessed and DeletePublished
// given an age of zero or less refuse it with ErrInvalidAge and delete
// nothing. Such an age took every row: the inbox's record of what was
// processed (a redelivery would run its effect again) and the published
// rows that keep a repeated Enqueue of their IDs a no-op. Rows older than
// a positive age still go.
func TestDeleteRefusesAgeOfZeroOrLess(t *testing.T) {
	ctx := context.Background()
	pool := testenv.PostgresPool(t)
	table := testenv.PostgresTable(t, pool, "inbox_test_")
	in := outbox.NewInbox(pool, outbox.WithTable(table))
	if err := in.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	nothing := func(context.Context, pgx.Tx) error { return nil }
	if _, err := in.Process(ctx, "mailer", "m-1", nothing); err != nil {
		t.Fatal(err)
	}
	o, opool := newOutbox(t)
	enqueue(t, opool, o, msg("published", ""))
	drain(t, o.Relay(&recorder{}))
	for _, age := range []time.Duration{0, -time.Hour} {
		if n, err := in.DeleteProcessed(ctx, age, 0); !errors.Is(err, outbox.ErrInvalidAge) || n != 0 {
			t.Errorf("DeleteProcessed(%v) = %d, %v; want 0, ErrInvalidAge", age, n, err)
		}
		if n, err := o.DeletePublished(ctx, age, 0); !errors.Is(err, outbox.ErrInvalidAge) || n != 0 {
			t.Errorf("DeletePublished(%v) = %d, %v; want 0, ErrInvalidAge", age, n, err)
		}
	}
	if dup, err := in.Process(ctx, "mailer", "m-1", nothing); !dup || err != nil {
		t.Errorf("redelivery after the refused deletes: Process = %v, %v; want a duplicate", dup, err)
	}
	if s, err := o.Stats(ctx); err != nil || s.Published != 1 {
		t.Errorf("Stats = %+v, %v; want the published row kept", s, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE "`+table+`" SET processed_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if n, err := in.DeleteProcessed(ctx, time.Hour, 0); err != nil || n != 1 {
		t.Errorf("DeleteProcessed(1h) of a row 2 hours old = %d, %v; want it deleted", n, err)
	}
}
