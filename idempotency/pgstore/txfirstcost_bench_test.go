package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// BenchmarkTxFirstCost runs BenchmarkRatio's tx-first operation (store:
// BeginTx, Tx.Claim, Tx.Complete, Tx.Commit of a new key) and its anchor
// (raw: BEGIN with the INSERT, the UPDATE with COMMIT, two pipelined
// batches) one at a time, each on a pool of one connection, so that the
// Go side's cost per operation can be read with callgrind (the difference
// of two -test.benchtime Nx runs over the difference of N) and its
// allocations with -benchmem. It reports the CPU time that the serving
// PostgreSQL backend spent per operation (server-ns/op, from its
// /proc/<pid>/schedstat: only where the server runs on this machine), a
// wall-clock figure, to be compared between the two sub-benchmarks of one
// run only.
//
//	go test -run '^$' -bench BenchmarkTxFirstCost -benchtime 4000x -benchmem ./idempotency/pgstore/
func BenchmarkTxFirstCost(b *testing.B) {
	ctx := context.Background()
	admin := newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	table := uniqueTable(b, admin)
	if err := pgstore.New(admin, pgstore.WithTable(table)).CreateSchema(ctx); err != nil {
		b.Fatal(err)
	}
	quoted := pgx.Identifier{table}.Sanitize()
	ins, upd := fmt.Sprintf(rawInsert, quoted), fmt.Sprintf(rawComplete, quoted)
	header := append(make([]byte, 8), "Content-Type: application/json"...) // about what the store keeps
	prefix := testenv.RandomName("c")
	var seq atomic.Int64
	run := func(b *testing.B, op func(pool *pgxpool.Pool, k idempotency.Key) error, pool *pgxpool.Pool) {
		key := func() idempotency.Key {
			return idempotency.Key{Scope: "bench", Key: prefix + strconv.FormatInt(seq.Add(1), 10)}
		}
		for range 2 * replaymixWindow { // warm up: prepare, and the store's paths set by a window of claims
			if err := op(pool, key()); err != nil {
				b.Fatal(err)
			}
		}
		pid := backendPID(b, pool)
		before := schedNanos(pid)
		b.ResetTimer()
		for range b.N {
			if err := op(pool, key()); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if after := schedNanos(pid); before >= 0 && after >= 0 {
			b.ReportMetric(float64(after-before)/float64(b.N), "server-ns/op")
		}
		if backendPID(b, pool) != pid {
			b.Fatal("the pool's connection changed during the run")
		}
	}
	onePool := func(b *testing.B) *pgxpool.Pool {
		return newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns, cfg.MinConns = 1, 1 })
	}
	b.Run("store", func(b *testing.B) {
		pool := onePool(b)
		txs := pgstore.NewTx(pool, pgstore.WithTable(table))
		b.Cleanup(func() { _ = txs.Close() })
		run(b, func(_ *pgxpool.Pool, k idempotency.Key) error { return txFirst(ctx, txs, k) }, pool)
	})
	b.Run("raw", func(b *testing.B) {
		run(b, func(pool *pgxpool.Pool, k idempotency.Key) error { return rawTxFirst(ctx, pool, ins, upd, header, k) }, onePool(b))
	})
}

// txFirst is the tx-first operation of BenchmarkRatio and
// BenchmarkTxFirstCost: BeginTx, Tx.Claim, Tx.Complete and Tx.Commit of
// k, a new key.
func txFirst(ctx context.Context, txs *pgstore.TxStore, k idempotency.Key) error {
	tx, err := txs.BeginTx(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	r, err := tx.Claim(ctx, k, "fp", time.Hour)
	if err != nil || !r.Acquired {
		return fmt.Errorf("claim: %+v %v", r, err)
	}
	if err := tx.Complete(ctx, k, r.Token, benchResponse, time.Hour); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// rawTxFirst is tx-first's raw anchor: BEGIN with ins, then upd with
// COMMIT (the raw INSERT and UPDATE of BenchmarkRatio, header the header
// kept), two pipelined batches on a connection of pool, for k, a new key.
func rawTxFirst(ctx context.Context, pool *pgxpool.Pool, ins, upd string, header []byte, k idempotency.Key) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	first := &pgx.Batch{}
	first.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	first.Queue(ins, "raw", k.Key, "fp")
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		return err
	}
	second := &pgx.Batch{}
	second.Queue(upd, "raw", k.Key, int32(201), header, benchResponse.Body)
	second.Queue("COMMIT")
	return conn.SendBatch(ctx, second).Close()
}

// replaymixWindow is internal/replaymix.Window, the claims after which a
// store's paths are set.
const replaymixWindow = 64

// backendPID returns the process id of the server backend of pool's one
// connection.
func backendPID(b *testing.B, pool *pgxpool.Pool) uint32 {
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	return conn.Conn().PgConn().PID()
}

// schedNanos returns the CPU time that process pid has run, in
// nanoseconds, or -1 when it cannot be read (a server on another machine).
func schedNanos(pid uint32) int64 {
	data, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/schedstat")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return -1
	}
	return n
}
