package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/replaymix"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestReplayFastPathConformance runs the conformance suite on a store that
// answers completed entries from its primary-key SELECT.
func TestReplayFastPathConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return newStore(t, nil, pgstore.WithReplayFastPath())
	}, storetest.Watching)
}

// TestReplayFastPathAnswersLikeClaim puts a key in each state the fast path
// must either answer or leave to the claim statement, and checks that a
// store with the fast path answers as one without it would: a completed
// entry (either fingerprint) from the SELECT, and anything else (absent, in
// progress, lapsed, released, expired) from the claim, which acquires or
// takes over.
func TestReplayFastPathAnswersLikeClaim(t *testing.T) {
	pool := newPool(t)
	plain := newStore(t, pool, pgstore.WithoutReplayFastPath())
	fast := fastPathOn(t, pool, plain.Table())
	scenario.FastPathAnswers(t, plain, fast, "fast", fastPathStates(plain, pool),
		func(t *testing.T, s idempotency.Store, k idempotency.Key) idempotency.ClaimResult {
			r, err := s.Claim(ctxT(t), k, "fp", time.Minute, time.Hour)
			if err != nil {
				t.Fatalf("Claim(%v): %v", k, err)
			}
			return r
		})
}

// TestTxReplayFastPathAnswersLikeClaim is TestReplayFastPathAnswersLikeClaim
// for transactional mode, in every pgx exec mode, directly and through
// PgBouncer (the modes it allows), on a pool of one connection, so that the
// read, the claim batch and the next Tx's statements share a connection.
func TestTxReplayFastPathAnswersLikeClaim(t *testing.T) {
	targets := execTargets(t)
	for name, tg := range targets {
		t.Run(name, func(t *testing.T) {
			pool := tg.newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
			plain := tg.txStore(t, pool, pgstore.WithoutReplayFastPath())
			fast := pgstore.NewTx(pool, tg.opts(t, pgstore.WithTable(plain.Table()), pgstore.WithReplayFastPath())...)
			t.Cleanup(func() { _ = fast.Close() })
			scenario.FastPathAnswers(t, plain, fast, "txfast", fastPathStates(plain.Store, pool),
				func(t *testing.T, s idempotency.Store, k idempotency.Key) idempotency.ClaimResult {
					tx, r := beginClaim(t, s.(*pgstore.TxStore), k, "fp")
					endTx(t, tx, false)
					return r
				})
		})
	}
}

// TestUpsertFirstAnswersLikeClaim holds a lease-mode store that begins its
// claims with the upsert statement (once nearly every claim acquires) to
// the answers of a store that claims with the claim statement alone, in
// every state of a key, in every exec mode, directly and behind PgBouncer.
// It counts the statements each claim sends (one round trip each, once
// prepared): a claim that acquires, a takeover of a lapsed lease included,
// sends one, as with the claim statement alone (a store slow enough to
// make a second one eat half the lease would otherwise never let a key be
// taken over); a claim that finds another row in the way sends two (the
// upsert, then the claim statement, which answers with the row).
func TestUpsertFirstAnswersLikeClaim(t *testing.T) {
	for name, tg := range execTargets(t) {
		t.Run(name, func(t *testing.T) {
			pool := tg.newPool(t)
			plain := tg.store(t, pool, pgstore.WithoutReplayFastPath())
			pgstore.ClaimStatementOnly(plain)
			rt := &roundTrips{}
			counted := tg.newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rt; c.MaxConns = 1 })
			ups := pgstore.New(counted, tg.opts(t, pgstore.WithTable(plain.Table()), pgstore.WithoutReplayFastPath())...)
			t.Cleanup(func() { _ = ups.Close() })
			upsertFirst(t, ups)
			scenario.FastPathAnswers(t, plain, ups, "upsert", fastPathStates(plain, pool),
				func(t *testing.T, s idempotency.Store, k idempotency.Key) idempotency.ClaimResult {
					before := rt.n.Load()
					r, err := s.Claim(ctxT(t), k, "fp", time.Minute, time.Hour)
					if err != nil {
						t.Fatalf("Claim(%v): %v", k, err)
					}
					want := int64(2)
					if r.Acquired {
						want = 1
					}
					if n := rt.n.Load() - before; s == ups && n != want {
						t.Errorf("Claim(%v) = %+v took %d round trips, want %d", k, scenario.AnswerOf(r), n, want)
					}
					return r
				})
		})
	}
}

// TestUpsertFirstConformance runs the conformance suite on a store that a
// window of claims of new keys made begin its claims with the upsert
// statement.
func TestUpsertFirstConformance(t *testing.T) { conformanceAfter(t, upsertFirst) }

// upsertFirst claims a window of new keys in s, so that it begins its
// claims with the upsert statement from then on (until a window of claims
// that do not acquire).
func upsertFirst(tb testing.TB, s *pgstore.Store) {
	tb.Helper()
	for i := range replaymix.Window {
		if r, err := s.Claim(ctxT(tb), key("warm-"+strconv.Itoa(i)), "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
			tb.Fatalf("claim of a new key: %+v %v", r, err)
		}
	}
	if !pgstore.UpsertsFirst(s) {
		tb.Fatal("a window of claims that acquired did not turn the upsert on")
	}
}

// TestTxInsertFirstAnswersLikeClaim holds the claim batch that begins with
// a plain INSERT (once nearly every claim acquires) to the answers of the
// claim statement in every state of a key, in every exec mode, directly
// and behind PgBouncer, and on a session that defaults to repeatable read
// (where the INSERT's check of the isolation level sends the claim into a
// transaction block of its own).
func TestTxInsertFirstAnswersLikeClaim(t *testing.T) {
	targets := execTargets(t)
	targets["direct/repeatable-read-session"] = pgTarget{url: pgURL(t)}
	for name, tg := range targets {
		t.Run(name, func(t *testing.T) {
			pool := tg.newPool(t, func(c *pgxpool.Config) {
				c.MaxConns = 1
				if strings.HasSuffix(name, "repeatable-read-session") {
					c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
				}
			})
			plain := tg.txStore(t, pool, pgstore.WithoutReplayFastPath())
			ins := pgstore.NewTx(pool, tg.opts(t, pgstore.WithTable(plain.Table()), pgstore.WithoutReplayFastPath())...)
			t.Cleanup(func() { _ = ins.Close() })
			insertFirst(t, ins)
			scenario.FastPathAnswers(t, plain, ins, "txinsert", fastPathStates(plain.Store, pool),
				func(t *testing.T, s idempotency.Store, k idempotency.Key) idempotency.ClaimResult {
					tx, r := beginClaim(t, s.(*pgstore.TxStore), k, "fp")
					if r.Acquired {
						// Held in a transaction block, read committed.
						var iso string
						if err := handlerTx(t, tx).QueryRow(ctxT(t), `SHOW transaction_isolation`).Scan(&iso); err != nil || iso != "read committed" {
							t.Errorf("the handler's isolation = %q, %v; want read committed", iso, err)
						}
					}
					endTx(t, tx, false)
					return r
				})
			if !pgstore.InsertsFirst(ins) {
				t.Error("the store stopped beginning with the INSERT within a window")
			}
		})
	}
}

// execTargets are the test database in every pgx exec mode, directly and
// through PgBouncer (in the modes it allows), by name.
func execTargets(t *testing.T) map[string]pgTarget {
	t.Helper()
	targets := map[string]pgTarget{}
	direct, bouncer := pgURL(t), testenv.PgBouncerURL(t)
	for _, m := range execModes {
		targets["direct/"+modeName(m)] = pgTarget{url: direct, mode: m}
		if !unsafeBehindPgBouncer(m) {
			targets["pgbouncer/"+modeName(m)] = pgTarget{url: bouncer, mode: m, listenURL: direct}
		}
	}
	return targets
}

// fastPathStates are the states of a key that a replay fast path must
// answer as the claim does, each set up by lease, a lease-mode store on
// the table (so that an entry in progress is committed, with a live lease),
// and by statements on pool.
func fastPathStates(lease *pgstore.Store, pool *pgxpool.Pool) []scenario.KeyState {
	table := pgx.Identifier{lease.Table()}.Sanitize()
	claim := func(t *testing.T, k idempotency.Key, fp string) idempotency.ClaimResult {
		t.Helper()
		r, err := lease.Claim(ctxT(t), k, fp, time.Hour, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim(%v): %+v %v", k, r, err)
		}
		return r
	}
	exec := func(t *testing.T, sql string, k idempotency.Key) {
		t.Helper()
		if _, err := pool.Exec(ctxT(t), sql, k.Key); err != nil {
			t.Fatal(err)
		}
	}
	return []scenario.KeyState{
		{Name: "absent", Setup: func(*testing.T, idempotency.Key) {}, Want: scenario.Answer{Acquired: true}},
		{Name: "in progress", Setup: func(t *testing.T, k idempotency.Key) { claim(t, k, "fp") },
			Want: scenario.Answer{State: idempotency.StateInProgress, Fingerprint: "fp"}},
		{Name: "in progress, other fingerprint", Setup: func(t *testing.T, k idempotency.Key) { claim(t, k, "fp-other") },
			Want: scenario.Answer{State: idempotency.StateInProgress, Fingerprint: "fp-other"}},
		{Name: "lapsed", Setup: func(t *testing.T, k idempotency.Key) {
			claim(t, k, "fp")
			exec(t, `UPDATE `+table+` SET lease_until = now() - interval '1 second' WHERE key = $1::text`, k)
		}, Want: scenario.Answer{Acquired: true, TookOver: true}},
		{Name: "lapsed, other fingerprint", Setup: func(t *testing.T, k idempotency.Key) {
			claim(t, k, "fp-other")
			exec(t, `UPDATE `+table+` SET lease_until = now() - interval '1 second' WHERE key = $1::text`, k)
		}, Want: scenario.Answer{State: idempotency.StateInProgress, Fingerprint: "fp-other"}},
		{Name: "in progress, expired", Setup: func(t *testing.T, k idempotency.Key) {
			claim(t, k, "fp-other")
			exec(t, `UPDATE `+table+` SET expires_at = now() - interval '1 second' WHERE key = $1::text`, k)
		}, Want: scenario.Answer{Acquired: true}},
		{Name: "released", Setup: func(t *testing.T, k idempotency.Key) {
			if err := lease.Release(ctxT(t), k, claim(t, k, "fp").Token); err != nil {
				t.Fatal(err)
			}
		}, Want: scenario.Answer{Acquired: true}},
		{Name: "completed", Setup: func(t *testing.T, k idempotency.Key) { completeAs(t, lease, k, "fp", "done") },
			Want: scenario.Answer{State: idempotency.StateCompleted, Fingerprint: "fp", Body: "done"}},
		{Name: "completed, other fingerprint", Setup: func(t *testing.T, k idempotency.Key) { completeAs(t, lease, k, "fp-other", "other") },
			Want: scenario.Answer{State: idempotency.StateCompleted, Fingerprint: "fp-other", Body: "other"}},
		{Name: "expired", Setup: func(t *testing.T, k idempotency.Key) {
			completeAs(t, lease, k, "fp", "done")
			exec(t, `UPDATE `+table+` SET expires_at = now() - interval '1 second' WHERE key = $1::text`, k)
		}, Want: scenario.Answer{Acquired: true}},
	}
}

// fastPathOn returns a store with the replay fast path on pool and the
// existing table, closed at cleanup.
func fastPathOn(t *testing.T, pool *pgxpool.Pool, table string) *pgstore.Store {
	t.Helper()
	fast := pgstore.New(pool, pgstore.WithTable(table), pgstore.WithReplayFastPath())
	t.Cleanup(func() { _ = fast.Close() })
	return fast
}

// completeAs claims k with fingerprint fp and completes it with body.
func completeAs(tb testing.TB, s *pgstore.Store, k idempotency.Key, fp, body string) {
	tb.Helper()
	ctx := context.Background()
	r, err := s.Claim(ctx, k, fp, time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		tb.Fatal(r, err)
	}
	if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte(body)}, time.Hour); err != nil {
		tb.Fatal(err)
	}
}

// TestReplayFastPathDuringCompletion reads a key with the fast path from
// several goroutines while its claim completes: every answer is the claim
// in progress (left to the claim statement, which refuses it) or the
// completed entry with its body, never an acquisition and never a
// completed entry without its response.
func TestReplayFastPathDuringCompletion(t *testing.T) {
	pool := newPool(t)
	plain := newStore(t, pool, pgstore.WithoutReplayFastPath())
	fast := fastPathOn(t, pool, plain.Table())
	ctx := ctxT(t)
	k := key("racing")
	r, err := plain.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var err error
			for seen := false; !seen; {
				select {
				case <-done:
					seen = true // one more read after the completion
				default:
				}
				res, cerr := fast.Claim(ctx, k, "fp", time.Minute, time.Hour)
				switch {
				case cerr != nil:
					err = cerr
				case res.Acquired:
					err = fmt.Errorf("the fast path acquired a key in progress or completed: %+v", res)
				case res.Entry.State == idempotency.StateCompleted && (res.Entry.Response == nil || string(res.Entry.Response.Body) != "done"):
					err = fmt.Errorf("completed entry without its response: %+v", res.Entry)
				case res.Entry.State == idempotency.StateInProgress && res.Entry.Token != r.Token:
					err = fmt.Errorf("in progress with token %d, want %d", res.Entry.Token, r.Token)
				case seen && res.Entry.State != idempotency.StateCompleted:
					err = fmt.Errorf("after the completion: %+v, want completed", res.Entry)
				}
				if err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	if err := plain.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("done")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
