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
