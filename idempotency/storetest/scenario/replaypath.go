package scenario

import (
	"strconv"
	"testing"

	"github.com/saferetry/saferetry/internal/replaymix"
)

// ReplayPathSteps drives ReplayPathFollowsTheMix through one store. Each
// function fails t itself when its claim does not answer as it must.
type ReplayPathSteps struct {
	// First executes a new key named name (claim, then complete and, in a
	// transactional store, commit): one claim.
	First func(t *testing.T, name string)
	// Replay claims the key that First made as "done" and checks that the
	// answer is its completed entry: one claim.
	Replay func(t *testing.T)
	// Sent runs call and returns what it sent to the store's server, as
	// names joined by spaces (commands, statements or batches).
	Sent func(call func()) string
}

// ReplayPathWant is what a store sends for a claim at three points: the
// last replay of a window of claims that were all replays but one, the
// first replay after that window, and a first execution after a window of
// first executions.
type ReplayPathWant struct {
	LastReplay, AfterReplays, AfterFirsts string
}

// ReplayPathFollowsTheMix checks which path a store's claims take as the
// share of replays changes (the stores' replay fast path, chosen per
// window of claims by internal/replaymix): it runs a whole window of first
// executions, then a window of the "done" key's first execution and
// replays, then a window of first executions, and compares what the
// store sent at the three points of want. A store that reads first only
// while replays are frequent sends the claim for the window's last replay,
// the read alone for the replay after it, and the claim alone (no read)
// for a first execution after the window of first executions.
func ReplayPathFollowsTheMix(t *testing.T, s ReplayPathSteps, want ReplayPathWant) {
	t.Helper()
	firsts := func(prefix string, n int) {
		for i := range n {
			s.First(t, prefix+strconv.Itoa(i))
		}
	}
	firsts("warm-", replaymix.Window) // a whole window, which also prepares what the store caches
	s.First(t, "done")                // the next window's first claim
	for range replaymix.Window - 2 {
		s.Replay(t)
	}
	if got := s.Sent(func() { s.Replay(t) }); got != want.LastReplay {
		t.Errorf("the window's last replay sent %q, want %q", got, want.LastReplay)
	}
	if got := s.Sent(func() { s.Replay(t) }); got != want.AfterReplays {
		t.Errorf("after a window of replays, a replay sent %q, want %q", got, want.AfterReplays)
	}
	firsts("first-", replaymix.Window)
	if got := s.Sent(func() { s.First(t, "last") }); got != want.AfterFirsts {
		t.Errorf("after a window of first executions, a first execution sent %q, want %q", got, want.AfterFirsts)
	}
}
