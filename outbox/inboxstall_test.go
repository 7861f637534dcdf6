package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// A Process whose handler failed while the database stopped answering
// returns once its context ends (Consume's, at shutdown), within the
// bound that the relay gives the statements that end a transaction after
// its context ended (5 s). Its ROLLBACK ran without any bound, so that
// Consume, and the process, waited for a database that might never
// answer.
func TestProcessReturnsAfterItsContextEndsWhileTheDatabaseStalls(t *testing.T) {
	const bound = 5*time.Second + 2*time.Second
	admin := testenv.PostgresPool(t)
	table := testenv.PostgresTable(t, admin, "inbox_test_")
	if err := outbox.NewInbox(admin, outbox.WithTable(table)).CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	pool, proxy := testenv.ProxiedPostgresPool(t)
	stalled := outbox.NewInbox(pool, outbox.WithTable(table))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ended time.Time
	returned := make(chan error, 1)
	go func() {
		_, err := stalled.Process(ctx, "c", "m-1", func(context.Context, pgx.Tx) error {
			proxy.SetStall(true) // the database stops answering
			go func() {
				time.Sleep(100 * time.Millisecond)
				ended = time.Now()
				cancel() // Consume stops
			}()
			return errors.New("handler failed")
		})
		returned <- err
	}()
	select {
	case err := <-returned:
		t.Logf("Process = %v, %v after its context ended", err, time.Since(ended).Round(10*time.Millisecond))
	case <-time.After(bound + 100*time.Millisecond):
		t.Errorf("Process had not returned %v after its context ended, the database not answering", bound)
		proxy.SetStall(false)
		<-returned
	}
}
