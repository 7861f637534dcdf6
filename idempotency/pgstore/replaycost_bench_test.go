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
// of a completed key by a default store, past its first window, so that
// it reads first) and its anchor (a primary-key SELECT of the same row)
// one at a time, each on a pool of one connection, for callgrind and
// -benchmem, as BenchmarkTxFirstCost does tx-first's; server-ns/op is the
// serving backend's CPU time per operation.
//
//	go test -run '^$' -bench BenchmarkReplayCost -benchtime 4000x -benchmem ./idempotency/pgstore/
func BenchmarkReplayCost(b *testing.B) {
	ctx := context.Background()
	admin := newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	table := uniqueTable(b, admin)
	s := pgstore.New(admin, pgstore.WithTable(table))
	if err := s.CreateSchema(ctx); err != nil {
		b.Fatal(err)
	}
	done := idempotency.Key{Scope: "bench", Key: "done"}
	complete(b, s, done)
	quoted := pgx.Identifier{table}.Sanitize()
	if _, err := admin.Exec(ctx, `INSERT INTO `+quoted+` SELECT 'raw', key, state, fingerprint, token, took_over, lease_until, expires_at, status, header, header_bin, body, oversize, watched FROM `+quoted+` WHERE scope = 'bench'`); err != nil {
		b.Fatal(err)
	}
	sel := fmt.Sprintf(rawSelect, quoted)
	run := func(b *testing.B, pool *pgxpool.Pool, op func() error) {
		for range 2 * replaymixWindow {
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
	onePool := func(b *testing.B) *pgxpool.Pool {
		return newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns, cfg.MinConns = 1, 1 })
	}
	b.Run("store", func(b *testing.B) {
		pool := onePool(b)
		st := pgstore.New(pool, pgstore.WithTable(table))
		b.Cleanup(func() { _ = st.Close() })
		run(b, pool, func() error { return replayed(st.Claim(ctx, done, "fp", 10*time.Second, time.Hour)) })
	})
	b.Run("raw", func(b *testing.B) {
		pool := onePool(b)
		run(b, pool, func() error {
			var (
				state        int16
				fp           string
				token        int64
				status       *int32
				header, body []byte
				oversize     bool
			)
			return pool.QueryRow(ctx, sel, "raw", "done").Scan(&state, &fp, &token, &status, &header, &body, &oversize)
		})
	})
}
