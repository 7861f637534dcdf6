package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/benchratio"
	storegate "github.com/saferetry/saferetry/internal/gate"
	"github.com/saferetry/saferetry/internal/testenv"
)

// ratioConcurrency are the numbers of goroutines BenchmarkRatio runs each
// operation from.
var ratioConcurrency = []int{1, 8, 32, 64}

// The raw anchors: the statements a hand-written idempotency table would
// send for the same work, each parameter typed.
const (
	rawSelect = `SELECT state, fingerprint, token, status, header_bin, body, oversize FROM %s WHERE scope = $1::text AND key = $2::text`
	rawInsert = `INSERT INTO %s (scope, key, state, fingerprint, lease_until, expires_at)
VALUES ($1::text, $2::text, 1, $3::text, statement_timestamp() + interval '10 seconds', statement_timestamp() + interval '1 hour') RETURNING token`
	rawComplete = `UPDATE %s SET state = 2, lease_until = NULL, status = $3::integer, header_bin = $4::bytea, body = $5::bytea
WHERE scope = $1::text AND key = $2::text`
)

// BenchmarkRatio runs each store operation and its raw anchor alternately
// (internal/benchratio) from 1, 8, 32 and 64 goroutines over one pool of as
// many connections (at least 4, at most 16), and prints their ratio:
//
//   - replay: Store.Claim of a completed key by a default store (which
//     reads first after its first window of claims, all replays here),
//     against a primary-key SELECT of the same row; replay-claim the same
//     with WithoutReplayFastPath (every replay the claim statement),
//     replay-fastpath with WithReplayFastPath;
//   - first: Store.Claim then Store.Complete of a new key by a default
//     store, against an INSERT then an UPDATE of a new key; first-fastpath
//     the same with WithReplayFastPath (one SELECT more);
//   - replay-sized and first-sized: replay and first through stores on a
//     pool of their own, sized as the package documentation asks for as
//     many calls in flight as the anchor's pool has connections (see
//     sizedConns): the Store's gate keeps a quarter of its pool for
//     Complete and Release, so on the shared pool at most three quarters
//     of the anchor's concurrency claims at once;
//   - tx-first: BeginTx, Tx.Claim, Tx.Complete and Tx.Commit of a new key,
//     against BEGIN with the INSERT and the UPDATE with COMMIT (two
//     pipelined batches, the round trips transactional mode needs);
//   - tx-replay: BeginTx, Tx.Claim and Tx.Rollback of a completed key by a
//     default TxStore (which reads first after its first window of
//     claims), against a primary-key SELECT; tx-replay-claim the same with
//     WithoutReplayFastPath (every replay the claim batch).
//
// Run it with
//
//	go test -run '^$' -bench BenchmarkRatio -benchtime 4000x ./idempotency/pgstore/
func BenchmarkRatio(b *testing.B) {
	ctx := context.Background()
	admin := newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 }) // drops the tables at cleanup
	for _, c := range ratioConcurrency {
		// The shared test server has 100 connections for every user.
		pool, closePool := ratioPool(b, min(max(c, 4), ratioMaxConns))
		table := uniqueTable(b, admin)
		s := pgstore.New(pool, pgstore.WithTable(table))
		fast := pgstore.New(pool, pgstore.WithTable(table), pgstore.WithReplayFastPath())
		claimOnly := pgstore.New(pool, pgstore.WithTable(table), pgstore.WithoutReplayFastPath())
		// firsts is a default store of its own, so that the replays before
		// do not set its path.
		firsts := pgstore.New(pool, pgstore.WithTable(table))
		txs := pgstore.NewTx(pool, pgstore.WithTable(table))
		txReplays := pgstore.NewTx(pool, pgstore.WithTable(table))
		txClaimOnly := pgstore.NewTx(pool, pgstore.WithTable(table), pgstore.WithoutReplayFastPath())
		done, sel := replayRows(b, pool, s)
		quoted := pgx.Identifier{table}.Sanitize()
		ins, upd := fmt.Sprintf(rawInsert, quoted), fmt.Sprintf(rawComplete, quoted)
		prefix := testenv.RandomName("k")
		var seq atomic.Int64
		newKey := func() idempotency.Key {
			return idempotency.Key{Scope: "bench", Key: prefix + strconv.FormatInt(seq.Add(1), 10)}
		}
		rawSelectOp := func() error { return rawSelectDone(ctx, pool, sel) }
		header := append(make([]byte, 8), "Content-Type: application/json"...) // about what the store keeps
		replayOp := func(s *pgstore.Store) func() error {
			return func() error {
				return replayed(s.Claim(ctx, done, "fp", 10*time.Second, time.Hour))
			}
		}
		// row runs one comparison: variant against anchor, each from c
		// goroutines.
		row := func(name string, variant, anchor func() error) {
			b.Run(fmt.Sprintf("%s/c=%d", name, c), func(b *testing.B) {
				benchratio.Run(b, benchratio.Parallel(b, c, variant), benchratio.Parallel(b, c, anchor))
			})
		}
		row("replay", replayOp(s), rawSelectOp)
		row("replay-claim", replayOp(claimOnly), rawSelectOp)
		row("replay-fastpath", replayOp(fast), rawSelectOp)
		firstOp := func(s *pgstore.Store) func() error {
			return func() error { return executeFirst(ctx, s, newKey()) }
		}
		rawFirstOp := func() error {
			k := newKey()
			var token int64
			if err := pool.QueryRow(ctx, ins, "raw", k.Key, "fp").Scan(&token); err != nil {
				return err
			}
			_, err := pool.Exec(ctx, upd, "raw", k.Key, int32(201), header, benchResponse.Body)
			return err
		}
		row("first-fastpath", firstOp(fast), rawFirstOp)
		row("first", firstOp(firsts), rawFirstOp)
		// The -sized rows: the same comparisons through stores on a pool
		// sized as the package documentation asks (the calls in flight
		// plus a quarter), so that their gate lets as many claims through
		// as the anchor has connections.
		sizedPool, closeSized := ratioPool(b, sizedConns(pool))
		sized := pgstore.New(sizedPool, pgstore.WithTable(table))
		sizedFirsts := pgstore.New(sizedPool, pgstore.WithTable(table))
		row("replay-sized", replayOp(sized), rawSelectOp)
		row("first-sized", firstOp(sizedFirsts), rawFirstOp)
		_ = sized.Close()
		_ = sizedFirsts.Close()
		closeSized()
		txFirstOp := func() error { return txFirst(ctx, txs, newKey()) }
		rawTxFirstOp := func() error { return rawTxFirst(ctx, pool, ins, upd, header, newKey()) }
		row("tx-first", txFirstOp, rawTxFirstOp)
		txReplayOp := func(txs *pgstore.TxStore) func() error {
			return func() error {
				tx, err := txs.BeginTx(ctx)
				if err != nil {
					return err
				}
				err = replayed(tx.Claim(ctx, done, "fp", time.Hour))
				if rerr := tx.Rollback(ctx); err == nil {
					err = rerr
				}
				return err
			}
		}
		row("tx-replay", txReplayOp(txReplays), rawSelectOp)
		row("tx-replay-claim", txReplayOp(txClaimOnly), rawSelectOp)
		_ = s.Close()
		_ = fast.Close()
		_ = claimOnly.Close()
		_ = firsts.Close()
		_ = txs.Close()
		_ = txReplays.Close()
		_ = txClaimOnly.Close()
		closePool()
	}
}

// replayed returns err, or an error when r, the answer to a claim of a
// completed key, is not its stored outcome.
func replayed(r idempotency.ClaimResult, err error) error {
	if err == nil && (r.Acquired || r.Entry.Response == nil) {
		err = fmt.Errorf("claim of a completed key answered %+v", r)
	}
	return err
}

// executeFirst claims k, a new key, in s and completes it.
func executeFirst(ctx context.Context, s *pgstore.Store, k idempotency.Key) error {
	r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
	if err != nil || !r.Acquired {
		return fmt.Errorf("claim: %+v %v", r, err)
	}
	return s.Complete(ctx, k, r.Token, benchResponse, time.Hour)
}

// ratioMaxConns bounds the pools of BenchmarkRatio: the shared test server
// has 100 connections for every user.
const ratioMaxConns = 16

// sizedConns returns the size of pool that the package documentation asks
// for when as many calls are in flight as pool has connections: those
// plus a quarter, so that a Store's gate (internal/gate), which keeps a
// quarter of its pool for Complete and Release, lets that many claims
// through at once.
func sizedConns(pool *pgxpool.Pool) int {
	inFlight := int(pool.Config().MaxConns)
	n := inFlight
	for storegate.New(n).Cap() < inFlight {
		n++
	}
	return n
}

// ratioPool returns a pool of n connections on the test database and the
// function that closes it.
func ratioPool(b *testing.B, n int) (*pgxpool.Pool, func()) {
	cfg, err := pgxpool.ParseConfig(pgURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(n)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	return pool, pool.Close
}

// BenchmarkReplayMix runs claims of which a given share are replays (the
// rest first executions: Claim and Complete of a new key) from 8
// goroutines, through a default store (which chooses its replay path from
// the mix) and through one with WithReplayFastPath, each against a store
// with WithoutReplayFastPath (every claim the claim statement): a speed
// over 1 is what reading first saves at that share, under 1 what it
// costs.
//
//	go test -run '^$' -bench BenchmarkReplayMix -benchtime 3072x ./idempotency/pgstore/
func BenchmarkReplayMix(b *testing.B) {
	const c = 8
	ctx := context.Background()
	admin := newPool(b, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	pool, closePool := ratioPool(b, c)
	b.Cleanup(closePool)
	table := uniqueTable(b, admin)
	store := func(b *testing.B, opts ...pgstore.Option) *pgstore.Store {
		s := pgstore.New(pool, append([]pgstore.Option{pgstore.WithTable(table)}, opts...)...)
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	if err := store(b).CreateSchema(ctx); err != nil {
		b.Fatal(err)
	}
	done := idempotency.Key{Scope: "mix", Key: "done"}
	complete(b, store(b), done)
	prefix := testenv.RandomName("m")
	var seq atomic.Int64
	mixOp := func(s *pgstore.Store, share int64) func() error {
		var n atomic.Int64
		return func() error {
			// The replays spread evenly: claim i is one when the count
			// of replays due by then, i*share/100, goes up.
			if i := n.Add(1); i*share/100 > (i-1)*share/100 {
				return replayed(s.Claim(ctx, done, "fp", 10*time.Second, time.Hour))
			}
			return executeFirst(ctx, s, idempotency.Key{Scope: "mix", Key: prefix + strconv.FormatInt(seq.Add(1), 10)})
		}
	}
	for _, share := range []int64{0, 50, 75, 90, 100} {
		for _, v := range []struct {
			name string
			opts []pgstore.Option
		}{{"adaptive", nil}, {"fastpath", []pgstore.Option{pgstore.WithReplayFastPath()}}} {
			b.Run(fmt.Sprintf("%s/replays=%d%%", v.name, share), func(b *testing.B) {
				benchratio.Run(b, benchratio.Parallel(b, c, mixOp(store(b, v.opts...), share)),
					benchratio.Parallel(b, c, mixOp(store(b, pgstore.WithoutReplayFastPath()), share)))
			})
		}
	}
}
