package main

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestSetupDBConcurrent: the roles of a deployment (payments, relay,
// notify) start together and each creates the tables if needed, so
// setupDB runs concurrently against a database without them. Concurrent
// CREATE TABLE IF NOT EXISTS of one table are not safe in PostgreSQL: the
// loser fails with a unique_violation on pg_type, and its role exits.
func TestSetupDBConcurrent(t *testing.T) {
	base := testenv.PostgresURL(t)
	ctx := context.Background()
	for round := range 20 {
		dbURL, drop, err := ownSchema(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pool, err := pgxpool.New(ctx, dbURL)
				if err != nil {
					errs <- err
					return
				}
				defer pool.Close()
				errs <- setupDB(ctx, pool)
			}()
		}
		wg.Wait()
		drop()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: three roles creating the tables at once: %v", round, err)
			}
		}
	}
}
