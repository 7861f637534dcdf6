package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
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
	case strings.Contains(d.SQL, "INSERT INTO"):
		kind = "claim"
	case strings.HasPrefix(d.SQL, "SELECT fingerprint"):
		kind = "select"
	case strings.HasPrefix(d.SQL, "WITH u AS (\n\tUPDATE"):
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

// TestReplayPathFollowsTheMix drives a store through a window of replays
// and then a window of first executions, and checks which statements each
// claim sends: by default a replay reads first (the SELECT alone) once a
// window of claims was mostly replays, and a first execution goes back to
// the claim statement alone (two statements, not three) once a window was
// mostly first executions; WithoutReplayFastPath always claims, and
// WithReplayFastPath always reads first.
func TestReplayPathFollowsTheMix(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []pgstore.Option
		// what the last replay of the first window, the first replay
		// after it, and a first execution after a window of them send.
		lastReplay, afterReplays, afterFirsts string
	}{
		{"default", nil, "claim", "select", "claim complete"},
		{"without", []pgstore.Option{pgstore.WithoutReplayFastPath()}, "claim", "claim", "claim complete"},
		{"with", []pgstore.Option{pgstore.WithReplayFastPath()}, "select", "select", "select claim complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &statementKinds{}
			s := newStore(t, newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rec }), tc.opts...)
			ctx := ctxT(t)
			done := key("done")
			completeAs(t, s, done, "fp", "done")
			replay := func() string {
				t.Helper()
				rec.take()
				r, err := s.Claim(ctx, done, "fp", time.Minute, time.Hour)
				if err != nil || r.Acquired || r.Entry.Response == nil || string(r.Entry.Response.Body) != "done" {
					t.Fatalf("replay: %+v %v", r, err)
				}
				return rec.take()
			}
			first := func(i int) string {
				t.Helper()
				rec.take()
				completeAs(t, s, key(fmt.Sprint("first-", i)), "fp", "new")
				return rec.take()
			}
			// completeAs's claim was the window's first claim.
			for range replaymix.Window - 2 {
				replay()
			}
			if got := replay(); got != tc.lastReplay {
				t.Errorf("the window's last replay sent %q, want %q", got, tc.lastReplay)
			}
			if got := replay(); got != tc.afterReplays {
				t.Errorf("after a window of replays, a replay sent %q, want %q", got, tc.afterReplays)
			}
			for i := range replaymix.Window {
				first(i)
			}
			if got := first(-1); got != tc.afterFirsts {
				t.Errorf("after a window of first executions, a first execution sent %q, want %q", got, tc.afterFirsts)
			}
		})
	}
}

// TestTxReplayPathFollowsTheMix is TestReplayPathFollowsTheMix in
// transactional mode: a replay is the claim batch, or the SELECT alone
// once a window of claims was mostly replays; a first execution is the
// claim batch and the outcome batch, with the SELECT before them while the
// store reads first.
func TestTxReplayPathFollowsTheMix(t *testing.T) {
	for _, tc := range []struct {
		name                                  string
		opts                                  []pgstore.Option
		lastReplay, afterReplays, afterFirsts string
	}{
		{"default", nil, "batch", "select", "batch batch"},
		{"without", []pgstore.Option{pgstore.WithoutReplayFastPath()}, "batch", "batch", "batch batch"},
		{"with", []pgstore.Option{pgstore.WithReplayFastPath()}, "select", "select", "select batch batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &statementKinds{}
			// One connection, so that no statement is prepared between the
			// recorded ones.
			s := newTxStore(t, newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rec; c.MaxConns = 1 }), tc.opts...)
			ctx := ctxT(t)
			sent := func(call func()) string {
				t.Helper()
				rec.take()
				call()
				return rec.take()
			}
			first := func(k idempotency.Key) {
				t.Helper()
				tx, r := beginClaim(t, s, k, "fp")
				if !r.Acquired {
					t.Fatalf("first execution of %v: %+v", k, r)
				}
				if err := tx.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("done")}, time.Hour); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			done := key("done")
			replay := func() {
				t.Helper()
				tx, r := beginClaim(t, s, done, "fp")
				if r.Acquired || r.Entry.Response == nil || string(r.Entry.Response.Body) != "done" {
					t.Fatalf("replay: %+v", r)
				}
				if err := tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
			}
			first(done) // the window's first claim
			for range replaymix.Window - 2 {
				replay()
			}
			if got := sent(replay); got != tc.lastReplay {
				t.Errorf("the window's last replay sent %q, want %q", got, tc.lastReplay)
			}
			if got := sent(replay); got != tc.afterReplays {
				t.Errorf("after a window of replays, a replay sent %q, want %q", got, tc.afterReplays)
			}
			for i := range replaymix.Window {
				first(key(fmt.Sprint("first-", i)))
			}
			if got := sent(func() { first(key("last")) }); got != tc.afterFirsts {
				t.Errorf("after a window of first executions, a first execution sent %q, want %q", got, tc.afterFirsts)
			}
		})
	}
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
func TestReplayPathConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := newStore(t, nil)
		replayStorm(t, s)
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
