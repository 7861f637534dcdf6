package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/replaymix"
)

// statementKinds records what each statement sent to PostgreSQL was: the
// claim statement, the completed entry's SELECT, or another.
type statementKinds struct {
	mu    sync.Mutex
	kinds []string
}

func (s *statementKinds) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	kind := "other"
	switch {
	case strings.HasPrefix(d.SQL, "INSERT INTO"):
		kind = "upsert"
	case strings.Contains(d.SQL, "INSERT INTO"):
		kind = "claim"
	case strings.HasPrefix(d.SQL, "SELECT fingerprint"):
		kind = "select"
	case strings.HasPrefix(d.SQL, "UPDATE") && strings.Contains(d.SQL, "state = 2,"):
		kind = "complete"
	}
	s.mu.Lock()
	s.kinds = append(s.kinds, kind)
	s.mu.Unlock()
	return ctx
}

func (s *statementKinds) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart records a batch (transactional mode's claim batch, or its
// outcome with COMMIT) as one "batch".
func (s *statementKinds) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	s.kinds = append(s.kinds, "batch")
	s.mu.Unlock()
	return ctx
}

func (s *statementKinds) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statementKinds) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// take returns the kinds recorded since the last take, joined by spaces.
func (s *statementKinds) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := strings.Join(s.kinds, " ")
	s.kinds = nil
	return k
}

// TestReplayPathFollowsTheMix checks which statements each claim sends as
// the share of replays changes (scenario.ReplayPathFollowsTheMix): by
// default a replay reads first (the SELECT alone) once a window of claims
// was mostly replays, and stays so while they are; a first execution goes
// back to the claim statement once a window was mostly first executions,
// and claims of an entry in progress do not count as replays;
// WithoutReplayFastPath always claims, and WithReplayFastPath always reads
// first. Apart from that choice, a window in which nearly every claim
// acquired makes the next claims begin with a statement that only inserts:
// in lease mode the upsert statement (see Store.upserts), so that after the
// window of first executions the scenario begins with, the replays of the
// next window, the last of which is checked, send the upsert, which finds
// the completed row, and then the claim statement, and a first execution
// after a window of them sends the upsert and the completion; the window of
// claims of an entry in progress turns the upsert off again. In
// transactional mode the claim is the claim batch, and a first execution
// ends with the outcome batch; the claim batch begins with a plain INSERT
// (see TestMiddlewareRoundTrips) after the same window, so that the
// replays of the next window send the INSERT's batch, which inserts
// nothing, and then the claim batch; so does the replay after the claims
// in progress, which is the last claim of the window after the one of
// first executions (the lease-mode claim that holds the key counts in the
// Store's window, not in the TxStore's): the INSERT goes on until a window
// decides otherwise.
func TestReplayPathFollowsTheMix(t *testing.T) {
	for _, tc := range []struct {
		name string
		tx   bool
		opts []pgstore.Option
		want scenario.ReplayPathWant
	}{
		{"default", false, nil, scenario.ReplayPathWant{LastReplay: "upsert claim", AfterReplays: "select", AfterFirsts: "upsert complete", AfterBusy: "claim"}},
		{"without", false, []pgstore.Option{pgstore.WithoutReplayFastPath()}, scenario.ReplayPathWant{LastReplay: "upsert claim", AfterReplays: "claim", AfterFirsts: "upsert complete", AfterBusy: "claim"}},
		{"with", false, []pgstore.Option{pgstore.WithReplayFastPath()}, scenario.ReplayPathWant{LastReplay: "select", AfterReplays: "select", AfterFirsts: "select upsert complete", AfterBusy: "select"}},
		{"tx default", true, nil, scenario.ReplayPathWant{LastReplay: "batch batch", AfterReplays: "select", AfterFirsts: "batch batch", AfterBusy: "batch batch"}},
		{"tx without", true, []pgstore.Option{pgstore.WithoutReplayFastPath()}, scenario.ReplayPathWant{LastReplay: "batch batch", AfterReplays: "batch", AfterFirsts: "batch batch", AfterBusy: "batch batch"}},
		{"tx with", true, []pgstore.Option{pgstore.WithReplayFastPath()}, scenario.ReplayPathWant{LastReplay: "select", AfterReplays: "select", AfterFirsts: "select batch batch", AfterBusy: "select"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &statementKinds{}
			// One connection, so that the statements are prepared once, in
			// the first window, on the connection that the recorded ones use.
			pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rec; c.MaxConns = 1 })
			steps := scenario.ReplayPathSteps{Sent: func(call func()) string {
				rec.take()
				call()
				return rec.take()
			}}
			var lease *pgstore.Store
			if tc.tx {
				tx := newTxStore(t, pool, tc.opts...)
				steps.First, steps.Replay, steps.Busy = txSteps(tx)
				lease = tx.Store
			} else {
				lease = newStore(t, pool, tc.opts...)
				steps.First, steps.Replay, steps.Busy = leaseSteps(lease)
			}
			// A lease-mode claim on the table: committed, in progress, with
			// a live lease, so that transactional claims of the key answer
			// it at once instead of waiting for a lock.
			steps.Hold = func(t *testing.T, name string) {
				if r, err := lease.Claim(ctxT(t), key(name), "fp", time.Hour, time.Hour); err != nil || !r.Acquired {
					t.Fatalf("claim of a new key: %+v %v", r, err)
				}
			}
			scenario.ReplayPathFollowsTheMix(t, steps, tc.want)
		})
	}
}

// leaseSteps returns the first execution, the replay and the claim of a
// key in progress of scenario.ReplayPathSteps for a lease-mode store.
func leaseSteps(s *pgstore.Store) (first func(*testing.T, string), replay func(*testing.T), busy func(*testing.T, string)) {
	first = func(t *testing.T, name string) { completeAs(t, s, key(name), "fp", "done") }
	claim := func(t *testing.T, name, fp string) idempotency.ClaimResult {
		r, err := s.Claim(ctxT(t), key(name), fp, time.Minute, time.Hour)
		if err != nil {
			t.Fatalf("claim of %s: %v", name, err)
		}
		return r
	}
	replay = func(t *testing.T) { wantReplay(t, claim(t, "done", "fp")) }
	busy = func(t *testing.T, name string) { wantBusy(t, claim(t, name, "other")) }
	return first, replay, busy
}

// wantReplay fails t unless r answers the "done" key's stored outcome.
func wantReplay(t *testing.T, r idempotency.ClaimResult) {
	t.Helper()
	if r.Acquired || r.Entry.Response == nil || string(r.Entry.Response.Body) != "done" {
		t.Fatalf("replay: %+v", r)
	}
}

// wantBusy fails t unless r answers an entry in progress.
func wantBusy(t *testing.T, r idempotency.ClaimResult) {
	t.Helper()
	if r.Acquired || r.Entry.State != idempotency.StateInProgress {
		t.Fatalf("claim of a key in progress: %+v", r)
	}
}

// txSteps returns the first execution (claim, complete, commit), the
// replay and the claim of a key in progress (claim, rollback) of
// scenario.ReplayPathSteps for a TxStore.
func txSteps(s *pgstore.TxStore) (first func(*testing.T, string), replay func(*testing.T), busy func(*testing.T, string)) {
	first = func(t *testing.T, name string) {
		k := key(name)
		tx, r := beginClaim(t, s, k, "fp")
		if !r.Acquired {
			t.Fatalf("first execution of %v: %+v", k, r)
		}
		if err := tx.Complete(ctxT(t), k, r.Token, idempotency.Response{Status: 201, Body: []byte("done")}, time.Hour); err != nil {
			t.Fatal(err)
		}
		endTx(t, tx, true)
	}
	refused := func(t *testing.T, name, fp string) idempotency.ClaimResult {
		tx, r := beginClaim(t, s, key(name), fp)
		endTx(t, tx, false)
		return r
	}
	replay = func(t *testing.T) { wantReplay(t, refused(t, "done", "fp")) }
	busy = func(t *testing.T, name string) { wantBusy(t, refused(t, name, "other")) }
	return first, replay, busy
}

// TestReplayPathConformanceTx runs the conformance suite, its transactional
// cases included, on a TxStore made to read first by a window of replays.
func TestReplayPathConformanceTx(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := newTxStore(t, nil)
		replayStorm(t, s.Store)
		return s
	}, storetest.Transactional, storetest.Watching)
}

// TestReplayPathConformance runs the conformance suite on a store that was
// made to read first by a window of replays, so that every case of the
// suite goes through the adaptive path as it is when replays are frequent.
func TestReplayPathConformance(t *testing.T) { conformanceAfter(t, replayStorm) }

// conformanceAfter runs the conformance suite on lease-mode stores that
// warm put on one of their paths first.
func conformanceAfter(t *testing.T, warm func(testing.TB, *pgstore.Store)) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := newStore(t, nil)
		warm(t, s)
		return s
	}, storetest.Watching)
}

// replayStorm claims a completed key of its own a window's worth of times,
// so that s reads first from then on (until a window of other claims).
func replayStorm(tb testing.TB, s *pgstore.Store) {
	tb.Helper()
	k := key("storm")
	completeAs(tb, s, k, "fp", "storm")
	for range replaymix.Window - 1 {
		if r, err := s.Claim(context.Background(), k, "fp", time.Minute, time.Hour); err != nil || r.Acquired {
			tb.Fatal(r, err)
		}
	}
}
