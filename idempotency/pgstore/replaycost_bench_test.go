package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// BenchmarkReplayCost runs BenchmarkRatio's replay operation (Store.Claim
// of a completed key by a default store, past its first window of claims,
// so that it reads first) and its anchor (a primary-key SELECT of the same
// row) one at a time, each on a pool of one connection, so that the Go
// side's cost per operation can be read with callgrind (the difference of
// two -test.benchtime Nx runs over the difference of N) and its
// allocations with -benchmem, as BenchmarkTxFirstCost does tx-first's.
// server-ns/op is the serving backend's CPU time per operation (see
// BenchmarkTxFirstCost), to be compared within one run only.
//
//	go test -run '^$' -bench BenchmarkReplayCost -benchtime 4000x -benchmem ./idempotency/pgstore/
func BenchmarkReplayCost(b *testing.B) {
	ctx := context.Background()
	admin := newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	table := uniqueTable(b, admin)
	done, sel := replayRows(b, admin, pgstore.New(admin, pgstore.WithTable(table)))
	run := func(b *testing.B, pool *pgxpool.Pool, op func() error) {
		for range 2 * replaymixWindow { // warm up: prepare, and the store's path set by a window of claims
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		pid := backendPID(b, pool)
		before := schedNanos(pid)
		b.ResetTimer()
		for range b.N {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if after := schedNanos(pid); before >= 0 && after >= 0 {
			b.ReportMetric(float64(after-before)/float64(b.N), "server-ns/op")
		}
	}
	b.Run("store", func(b *testing.B) {
		pool := oneConnPool(b)
		s := pgstore.New(pool, pgstore.WithTable(table))
		b.Cleanup(func() { _ = s.Close() })
		run(b, pool, func() error { return replayed(s.Claim(ctx, done, "fp", 10*time.Second, time.Hour)) })
	})
	b.Run("raw", func(b *testing.B) {
		pool := oneConnPool(b)
		run(b, pool, func() error { return rawSelectDone(ctx, pool, sel) })
	})
}

// replayRows creates the schema of s's table, completes a key in it with
// benchResponse and copies its row to the scope "raw" through pool: it
// returns the key and the raw anchor's SELECT of the copy (see
// rawSelectDone).
func replayRows(b *testing.B, pool *pgxpool.Pool, s *pgstore.Store) (done idempotency.Key, sel string) {
	ctx := context.Background()
	if err := s.CreateSchema(ctx); err != nil {
		b.Fatal(err)
	}
	done = idempotency.Key{Scope: "bench", Key: "done"}
	complete(b, s, done)
	quoted := pgx.Identifier{s.Table()}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+quoted+` SELECT 'raw', key, state, fingerprint, token, took_over, lease_until, expires_at, status, header, header_bin, body, oversize, watched FROM `+quoted+` WHERE scope = 'bench'`); err != nil {
		b.Fatal(err)
	}
	return done, fmt.Sprintf(rawSelect, quoted)
}

// rawSelectDone is the replay's raw anchor: sel, the primary-key SELECT of
// replayRows, of the raw copy of the completed row, through pool.
func rawSelectDone(ctx context.Context, pool *pgxpool.Pool, sel string) error {
	var (
		state        int16
		fp           string
		token        int64
		status       *int32
		header, body []byte
		oversize     bool
	)
	return pool.QueryRow(ctx, sel, "raw", "done").Scan(&state, &fp, &token, &status, &header, &body, &oversize)
}

// oneConnPool returns a pool of one connection, opened at once, on the
// test database.
func oneConnPool(b *testing.B) *pgxpool.Pool {
	return newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns, cfg.MinConns = 1, 1 })
}
