package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// bizTable creates a business table next to the store's table, dropped at
// cleanup.
func bizTable(t *testing.T, pool *pgxpool.Pool, s *pgstore.TxStore) string {
	t.Helper()
	name := s.Table() + "_biz"
	if _, err := pool.Exec(ctxT(t), `CREATE TABLE "`+name+`" (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+name+`"`) })
	return name
}

func bizRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	return count(t, pool, table)
}

// beginClaim begins a transaction and claims k in it.
func beginClaim(t *testing.T, s *pgstore.TxStore, k idempotency.Key, fp string) (idempotency.Tx, idempotency.ClaimResult) {
	t.Helper()
	ctx := ctxT(t)
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	r, err := tx.Claim(ctx, k, fp, time.Hour)
	if err != nil {
		t.Fatalf("tx Claim: %v", err)
	}
	return tx, r
}

// acquire is beginClaim of k with fingerprint "fp" that must acquire k: it
// also returns the pgx.Tx the handler finds in the transaction's context.
func acquire(t *testing.T, s *pgstore.TxStore, k idempotency.Key) (idempotency.Tx, idempotency.ClaimResult, pgx.Tx) {
	t.Helper()
	tx, r := beginClaim(t, s, k, "fp")
	if !r.Acquired {
		t.Fatalf("Claim = %+v", r)
	}
	return tx, r, handlerTx(t, tx)
}

// handlerTx returns the pgx.Tx a handler finds in tx's context.
func handlerTx(t *testing.T, tx idempotency.Tx) pgx.Tx {
	t.Helper()
	ptx, ok := pgstore.TxFromContext(tx.Context(context.Background()))
	if !ok {
		t.Fatal("TxFromContext found no transaction in the handler's context")
	}
	return ptx
}

// endTx commits tx if commit is set and rolls it back otherwise: a
// request's transaction or a handler's savepoint.
func endTx(t *testing.T, tx interface {
	Commit(context.Context) error
	Rollback(context.Context) error
}, commit bool) {
	t.Helper()
	end := tx.Rollback
	if commit {
		end = tx.Commit
	}
	if err := end(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestTxCommitMakesWritesAndRecordVisibleTogether(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("commit")
	tx, r, ptx := acquire(t, s, k)
	if r.Token <= 0 || r.TookOver {
		t.Fatalf("Claim = %+v", r)
	}
	hctx := tx.Context(ctx)
	if _, err := ptx.Exec(hctx, `INSERT INTO "`+biz+`" (id) VALUES ('order-1')`); err != nil {
		t.Fatal(err)
	}
	// Lock timeout is set for the claim only: the handler's session value is back.
	var lt string
	if err := ptx.QueryRow(hctx, `SHOW lock_timeout`).Scan(&lt); err != nil || lt != "0" {
		t.Fatalf("lock_timeout inside the handler = %q, %v; want the session default 0", lt, err)
	}
	if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("made")}, time.Hour); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// Nothing is visible outside before the commit.
	if _, found, err := s.Get(ctx, k); err != nil || found {
		t.Fatalf("Get before commit: found=%v err=%v", found, err)
	}
	if n := bizRows(t, pool, biz); n != 0 {
		t.Fatalf("business rows before commit = %d", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.State != idempotency.StateCompleted || string(e.Response.Body) != "made" || e.Token != r.Token {
		t.Fatalf("Get after commit = %+v %v %v", e, found, err)
	}
	if n := bizRows(t, pool, biz); n != 1 {
		t.Fatalf("business rows after commit = %d, want 1", n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback after Commit = %v, want nil", err)
	}
	// A later duplicate replays.
	tx2, r2 := beginClaim(t, s, k, "fp")
	if r2.Acquired || r2.Entry.State != idempotency.StateCompleted || string(r2.Entry.Response.Body) != "made" {
		t.Fatalf("duplicate Claim = %+v", r2)
	}
	tx2.Rollback(ctx)
}

func TestTxRollbackLeavesNothing(t *testing.T) {
	pool, s, biz, ctx := newBizTxStore(t)
	k := key("rollback")
	tx, r, ptx := acquire(t, s, k)
	if _, err := ptx.Exec(ctx, `INSERT INTO "`+biz+`" (id) VALUES ('order-1')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("second Rollback: %v", err)
	}
	if _, found, err := s.Get(ctx, k); err != nil || found {
		t.Fatalf("Get after rollback: found=%v err=%v", found, err)
	}
	if n := bizRows(t, pool, biz); n != 0 {
		t.Fatalf("business rows after rollback = %d", n)
	}
	_, r2 := beginClaim(t, s, k, "other-fp")
	if !r2.Acquired || r2.Token <= r.Token {
		t.Fatalf("Claim after rollback = %+v, want acquired with token > %d", r2, r.Token)
	}
}

// waitBlocked waits until some backend waits on a lock in a statement that
// mentions table.
func waitBlocked(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	testenv.Eventually(t, "a claim waits on the uncommitted row", func() bool {
		var n int
		err := pool.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

type claimAnswer struct {
	tx  idempotency.Tx
	res idempotency.ClaimResult
	err error
}

// claimAsync begins a transaction and claims k in it in a goroutine.
func claimAsync(t *testing.T, s *pgstore.TxStore, k idempotency.Key, fp string) <-chan claimAnswer {
	ch := make(chan claimAnswer, 1)
	ctx := ctxT(t)
	go func() {
		tx, err := s.BeginTx(ctx)
		if err != nil {
			ch <- claimAnswer{err: err}
			return
		}
		r, err := tx.Claim(ctx, k, fp, time.Hour)
		ch <- claimAnswer{tx: tx, res: r, err: err}
	}()
	return ch
}

// contention is a claim of k in a transaction left open (holder, held) and
// a second claim of k, from another transaction, waiting on its row lock.
type contention struct {
	pool   *pgxpool.Pool
	k      idempotency.Key
	holder idempotency.Tx
	held   idempotency.ClaimResult
	waiter <-chan claimAnswer
}

// claimPaths are the two ways a transactional claim's batch begins: with
// the claim statement, and with the plain INSERT that a store turns to once
// nearly every claim acquires (see insertFirst).
var claimPaths = []string{"claim", "insert"}

// insertFirst makes s begin its claims with a plain INSERT, with a window
// of claims of new keys, each rolled back.
func insertFirst(t *testing.T, s *pgstore.TxStore) {
	t.Helper()
	for i := range 64 {
		tx, _ := beginClaim(t, s, key("warm-"+strconv.Itoa(i)), "fp")
		endTx(t, tx, false)
	}
	if !pgstore.InsertsFirst(s) {
		t.Fatal("a window of claims that acquired did not turn the plain INSERT on")
	}
}

// newContention sets up a contention for key(name) on a store whose lock
// timeout outlasts the test, its claims on path (see claimPaths), and
// returns once the second claim waits.
func newContention(t *testing.T, name, path string) contention {
	t.Helper()
	pool := newPool(t)
	s := newTxStore(t, pool, pgstore.WithLockTimeout(20*time.Second))
	if path == "insert" {
		insertFirst(t, s)
	}
	k := key(name)
	tx, r := beginClaim(t, s, k, "fp")
	ch := claimAsync(t, s, k, "fp")
	waitBlocked(t, pool, s.Table())
	return contention{pool: pool, k: k, holder: tx, held: r, waiter: ch}
}

// waited returns what the waiting claim answered once the holder let go;
// its transaction rolls back at cleanup.
func (c contention) waited(t *testing.T) idempotency.ClaimResult {
	t.Helper()
	a := <-c.waiter
	if a.err != nil {
		t.Fatalf("waiting Claim: %v", a.err)
	}
	t.Cleanup(func() { a.tx.Rollback(context.Background()) })
	return a.res
}

func TestTxDuplicateWaitsThenReplays(t *testing.T) {
	for _, path := range claimPaths {
		t.Run(path, func(t *testing.T) {
			c := newContention(t, "wait", path)
			ctx := ctxT(t)
			if err := c.holder.Complete(ctx, c.k, c.held.Token, idempotency.Response{Status: 201, Body: []byte("first")}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := c.holder.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if r := c.waited(t); r.Acquired || r.Entry.State != idempotency.StateCompleted || string(r.Entry.Response.Body) != "first" {
				t.Fatalf("waiting Claim = %+v, want the committed outcome", r)
			}
		})
	}
}

func TestTxDuplicateAcquiresAfterRollbackOrCrash(t *testing.T) {
	for _, name := range []string{"rollback", "crash", "rollback/insert", "crash/insert"} {
		t.Run(name, func(t *testing.T) {
			crash := strings.HasPrefix(name, "crash")
			path := "claim"
			if strings.HasSuffix(name, "/insert") {
				path = "insert"
			}
			c := newContention(t, "free", path)
			ctx := ctxT(t)
			if crash {
				// The holder's server process dies, as when its instance
				// crashes: PostgreSQL rolls its transaction back.
				var pid int
				if err := handlerTx(t, c.holder).QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					t.Fatal(err)
				}
				if _, err := c.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
					t.Fatal(err)
				}
			} else if err := c.holder.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if r := c.waited(t); !r.Acquired || r.Token <= c.held.Token {
				t.Fatalf("waiting Claim = %+v, want acquired with token > %d", r, c.held.Token)
			}
			if crash {
				// Complete keeps the outcome for Commit's round trip, so the
				// dead connection shows at Commit at the latest.
				err := c.holder.Complete(ctx, c.k, c.held.Token, idempotency.Response{Status: 201}, time.Hour)
				if err == nil {
					err = c.holder.Commit(ctx)
				}
				if err == nil {
					t.Fatal("the dead holder's Complete and Commit succeeded")
				}
			}
		})
	}
}

func TestTxLockTimeoutReportsInProgress(t *testing.T) {
	for _, path := range claimPaths {
		t.Run(path, func(t *testing.T) {
			s := newTxStore(t, nil, pgstore.WithLockTimeout(30*time.Millisecond))
			if path == "insert" {
				insertFirst(t, s)
			}
			ctx := ctxT(t)
			k := key("timeout")
			_, r := beginClaim(t, s, k, "fp")
			if !r.Acquired {
				t.Fatal(r)
			}
			tx2, err := s.BeginTx(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := tx2.Claim(ctx, k, "fp", time.Hour)
			if err != nil {
				t.Fatalf("Claim after the lock timeout = %v; want no error", err)
			}
			if r2.Acquired || r2.Entry.State != idempotency.StateInProgress || r2.Entry.LeaseRemaining != 30*time.Millisecond || r2.Entry.Fingerprint != "fp" {
				t.Fatalf("Claim after the lock timeout = %+v; want in progress", r2)
			}
			if err := tx2.Rollback(ctx); err != nil {
				t.Fatalf("Rollback of the timed-out transaction: %v", err)
			}
		})
	}
}

func TestTxClaimAgainstLeaseModeRows(t *testing.T) {
	s := newTxStore(t, nil)
	ctx := ctxT(t)
	// A completed entry with another fingerprint blocks with its own.
	k := key("mixed")
	lr, err := s.Claim(ctx, k, "fp-a", time.Minute, time.Hour)
	if err != nil || !lr.Acquired {
		t.Fatal(lr, err)
	}
	tx, r := beginClaim(t, s, k, "fp-b")
	if r.Acquired || r.Entry.Fingerprint != "fp-a" || r.Entry.State != idempotency.StateInProgress || r.Entry.LeaseRemaining <= 0 {
		t.Fatalf("tx Claim over a live lease = %+v", r)
	}
	tx.Rollback(ctx)
	// An expired row is absent.
	k2 := key("expired")
	if _, err := s.Claim(ctx, k2, "fp", time.Minute, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the entry expires", func() bool {
		_, found, err := s.Get(ctx, k2)
		return err == nil && !found
	})
	tx2, r2 := beginClaim(t, s, k2, "fp-new")
	if !r2.Acquired || r2.TookOver {
		t.Fatalf("tx Claim over an expired row = %+v", r2)
	}
	// Complete with a wrong token is refused inside the transaction.
	err = tx2.Complete(ctx, k2, r2.Token+1000, idempotency.Response{Status: 200}, time.Hour)
	if !errors.Is(err, idempotency.ErrStaleToken) || !strings.HasPrefix(err.Error(), "pgstore:") {
		t.Fatalf("Complete with a wrong token = %v; want pgstore: ... ErrStaleToken", err)
	}
}

func TestTxFromContextAbsent(t *testing.T) {
	if tx, ok := pgstore.TxFromContext(context.Background()); ok || tx != nil {
		t.Fatalf("TxFromContext(Background) = %v, %v", tx, ok)
	}
}
