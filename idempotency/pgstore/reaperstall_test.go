package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestReaperStopReturnsWhileTheDatabaseStalls: the stop function of
// StartReaper, called at shutdown (cmd/mockserver, the postgres-tx
// example) while the database does not answer, returns within a bound.
// It waited for the reaper's statement in flight to finish, which a
// database that stalls (a partition, a failover behind an address that
// still accepts connections) never does: the process could not stop.
func TestReaperStopReturnsWhileTheDatabaseStalls(t *testing.T) {
	const bound = 3500 * time.Millisecond
	ctx := context.Background()
	table := uniqueTable(t, newPool(t))
	pool, proxy := testenv.ProxiedPostgresPool(t)
	s := pgstore.New(pool, pgstore.WithTable(table))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	const interval = 50 * time.Millisecond
	stop := s.StartReaper(context.Background(), interval)
	time.Sleep(3 * interval) // it reaps
	proxy.SetStall(true)
	time.Sleep(3 * interval) // its next statement waits for the database
	start := time.Now()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Logf("stop returned after %v", time.Since(start).Round(10*time.Millisecond))
	case <-time.After(bound):
		t.Errorf("the reaper's stop had not returned %v after it was called, the database not answering", bound)
		proxy.SetStall(false)
		<-stopped
	}
}
