package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/testenv"
)

// roundTrips counts the statements and batches sent to the server: each is
// one network round trip once the statement is prepared on the connection.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func benchPool(b *testing.B) (*pgxpool.Pool, *roundTrips) {
	rt := &roundTrips{}
	pool := newPool(b, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rt })
	return pool, rt
}

// measure runs op b.N times and reports round trips per op.
func measure(b *testing.B, rt *roundTrips, op func(i int)) {
	op(-1) // warm up: prepare the statements on the connection
	b.ResetTimer()
	start := rt.n.Load()
	for i := range b.N {
		op(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(rt.n.Load()-start)/float64(b.N), "roundtrips/op")
}

var benchResponse = idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"ord_123","amount":500}`)}

// firstExecution returns the store operations of one first execution in
// lease mode, on key i: Claim, then Complete.
func firstExecution(b *testing.B, s *pgstore.Store) func(i int) {
	if err := s.CreateSchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	return func(i int) { complete(b, s, idempotency.Key{Scope: "bench", Key: fmt.Sprint("k", i)}) }
}

// complete claims and completes k with benchResponse.
func complete(tb testing.TB, s *pgstore.Store, k idempotency.Key) {
	tb.Helper()
	ctx := context.Background()
	r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
	if err != nil || !r.Acquired {
		tb.Fatal(r, err)
	}
	if err := s.Complete(ctx, k, r.Token, benchResponse, time.Hour); err != nil {
		tb.Fatal(err)
	}
}

func BenchmarkStore(b *testing.B) {
	resp := benchResponse
	ctx := context.Background()
	b.Run("claim+complete", func(b *testing.B) {
		pool, rt := benchPool(b)
		measure(b, rt, firstExecution(b, pgstore.New(pool, pgstore.WithTable(uniqueTable(b, pool)))))
	})
	b.Run("replay", func(b *testing.B) {
		pool, rt := benchPool(b)
		s := pgstore.New(pool, pgstore.WithTable(uniqueTable(b, pool)))
		if err := s.CreateSchema(ctx); err != nil {
			b.Fatal(err)
		}
		k := idempotency.Key{Scope: "bench", Key: "done"}
		complete(b, s, k)
		measure(b, rt, func(int) {
			r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
			if err != nil || r.Acquired || r.Entry.Response == nil {
				b.Fatal(r, err)
			}
		})
	})
	b.Run("tx-begin+claim+complete+commit", func(b *testing.B) {
		pool, rt := benchPool(b)
		s := pgstore.NewTx(pool, pgstore.WithTable(uniqueTable(b, pool)))
		if err := s.CreateSchema(ctx); err != nil {
			b.Fatal(err)
		}
		measure(b, rt, func(i int) {
			k := idempotency.Key{Scope: "bench", Key: fmt.Sprint("k", i)}
			tx, err := s.BeginTx(ctx)
			if err != nil {
				b.Fatal(err)
			}
			r, err := tx.Claim(ctx, k, "fp", time.Hour)
			if err != nil || !r.Acquired {
				b.Fatal(r, err)
			}
			if err := tx.Complete(ctx, k, r.Token, resp, time.Hour); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkMiddlewareParallel measures whole protected requests (new keys,
// so every request claims, runs a trivial handler and completes) through the
// Middleware under b.RunParallel, without the network between client and
// server, in lease mode and in transactional mode.
func BenchmarkMiddlewareParallel(b *testing.B) {
	for _, mode := range []string{"lease", "tx"} {
		b.Run("postgres-"+mode, func(b *testing.B) {
			pool, rt := benchPool(b)
			table := uniqueTable(b, pool)
			var s idempotency.Store = pgstore.New(pool, pgstore.WithTable(table))
			if err := pgstore.New(pool, pgstore.WithTable(table)).CreateSchema(context.Background()); err != nil {
				b.Fatal(err)
			}
			if mode == "tx" {
				s = pgstore.NewTx(pool, pgstore.WithTable(table))
			}
			before := rt.n.Load()
			n := scenario.ParallelFirstExecutions(b, s)
			b.ReportMetric(float64(rt.n.Load()-before)/float64(n), "roundtrips/op")
		})
	}
}

// BenchmarkExecModes measures a first execution in lease mode (Claim,
// Complete, one connection) in each pgx exec mode, on a direct connection
// and, when SAFERETRY_PGBOUNCER_URL is set, through PgBouncer in
// transaction mode (without the modes it breaks, which the store refuses
// there).
func BenchmarkExecModes(b *testing.B) {
	targets := []struct{ name, url string }{{"direct", pgURL(b)}}
	if u := os.Getenv(testenv.EnvPgBouncerURL); u != "" {
		targets = append(targets, struct{ name, url string }{"pgbouncer", u})
	}
	for _, via := range targets {
		for _, mode := range execModes {
			if via.name == "pgbouncer" && unsafeBehindPgBouncer(mode) {
				continue
			}
			b.Run(via.name+"/"+modeName(mode), func(b *testing.B) {
				rt := &roundTrips{}
				pool := pgTarget{url: via.url, mode: mode}.newPool(b, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rt; c.MaxConns = 1 })
				measure(b, rt, firstExecution(b, pgstore.New(pool, pgstore.WithTable(uniqueTable(b, pool)))))
			})
		}
	}
}

// BenchmarkTableChurn measures what the records table goes through in
// lease mode: b.N first executions (Claim, Complete) from 8 goroutines,
// their records expired at once (a 1 µs ttl at Complete), then removed by
// DeleteExpired in batches of DefaultReapBatch. It reports, per
// execution, the dead row versions the table holds before the reaper runs
// (Complete updates the indexed expires_at, so it is never a HOT update
// and leaves the claim's version behind), the bytes of the table and its
// indexes, and the reaper's time per deleted row; and the dead versions
// per execution after the reaper, which only VACUUM (autovacuum) makes
// reusable.
func BenchmarkTableChurn(b *testing.B) {
	ctx := context.Background()
	admin := newPool(b)
	table := uniqueTable(b, admin)
	work := newPool(b, func(c *pgxpool.Config) { c.MaxConns = 8 })
	s := pgstore.New(work, pgstore.WithTable(table))
	if err := s.CreateSchema(ctx); err != nil {
		b.Fatal(err)
	}
	// The table's own autovacuum would clean up behind the measurement.
	if _, err := admin.Exec(ctx, `ALTER TABLE "`+table+`" SET (autovacuum_enabled = false)`); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.ResetTimer()
	b.SetParallelism(4) // 8 goroutines on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := idempotency.Key{Scope: "churn", Key: fmt.Sprint("k", next.Add(1))}
			r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
			if err != nil || !r.Acquired {
				b.Error(r, err)
				return
			}
			if err := s.Complete(ctx, k, r.Token, benchResponse, time.Microsecond); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	stats := func() (dead, bytes int64) {
		// Closed backends flush their statistics; a fresh one reads them.
		_ = s.Close()
		work.Reset()
		time.Sleep(1100 * time.Millisecond) // statistics flush at most once a second
		err := admin.QueryRow(ctx, `SELECT n_dead_tup, pg_total_relation_size(relid) FROM pg_stat_user_tables WHERE relname = $1::text`, table).Scan(&dead, &bytes)
		if err != nil {
			b.Fatal(err)
		}
		return dead, bytes
	}
	dead, bytes := stats()
	start := time.Now()
	var deleted int64
	for {
		n, err := s.DeleteExpired(ctx, pgstore.DefaultReapBatch)
		if err != nil {
			b.Fatal(err)
		}
		deleted += n
		if n < pgstore.DefaultReapBatch {
			break
		}
	}
	reap := time.Since(start)
	if deleted != int64(b.N) {
		b.Fatalf("reaper deleted %d rows, want %d", deleted, b.N)
	}
	deadAfter, _ := stats()
	b.ReportMetric(float64(dead)/float64(b.N), "dead-before-reap/op")
	b.ReportMetric(float64(bytes)/float64(b.N), "table+index-B/op")
	b.ReportMetric(float64(reap.Nanoseconds())/float64(deleted), "reap-ns/row")
	b.ReportMetric(float64(deadAfter)/float64(b.N), "dead-after-reap/op")
}
