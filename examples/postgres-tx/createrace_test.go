package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestCreateTablesConcurrent: instances of the example started together on
// a database without its tables each create them. Concurrent CREATE TABLE
// IF NOT EXISTS of one table are not safe in PostgreSQL: the loser fails
// with a unique_violation on pg_type, and its instance exits.
func TestCreateTablesConcurrent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 10 {
		dbURL := schemaURL(t)
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
				errs <- createTables(ctx, pool)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: three instances creating the tables at once: %v", round, err)
			}
		}
	}
}
