package scenario

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/saferetry/saferetry/internal/replaymix"
)

// ReplayPathSteps drives ReplayPathFollowsTheMix through one store. Each
// function makes one claim, and fails t itself when the claim does not
// answer as it must. ReplayPathFollowsTheMix calls them one at a time,
// from the goroutine it runs in, so they need not be safe for concurrent
// use.
type ReplayPathSteps struct {
	// First executes a new key named name (claim, then complete and, in a
	// transactional store, commit).
	First func(t *testing.T, name string)
	// Replay claims the key that First made as "done" and checks that the
	// answer is its completed entry.
	Replay func(t *testing.T)
	// Hold claims a new key named name and leaves it in progress, with a
	// lease that outlives the test, where every store instance and
	// transaction sees it.
	Hold func(t *testing.T, name string)
	// Busy claims the key that Hold left in progress as name, with another
	// fingerprint, and checks that the answer is that entry in progress.
	Busy func(t *testing.T, name string)
	// Sent runs call and returns what it sent to the store's server, as
	// names joined by spaces (commands, statements or batches).
	Sent func(call func()) string
}

// ReplayPathWant is what a store sends for a claim at four points: the
// last replay of a window of claims that were all replays but one
// (LastReplay), each replay while nearly every claim is a replay
// (AfterReplays), a first execution after a window of first executions
// (AfterFirsts), and a replay after a window of claims that found an entry
// in progress (AfterBusy). It is a plain value of strings, safe to copy
// and to read from several goroutines at once.
type ReplayPathWant struct {
	LastReplay, AfterReplays, AfterFirsts, AfterBusy string
}

// ReplayPathFollowsTheMix checks which path a store's claims take as the
// share of replays changes (the stores' replay fast path, chosen per
// window of claims by internal/replaymix). Window by window: first
// executions; "done"'s first execution and replays; five windows in which
// 15 claims of 16 are replays, each replay sending AfterReplays (so the
// replays that the read answers count as replays); first executions; and
// a window of claims of an entry in progress, which are no replays. A
// store that reads first only while replays are frequent sends the claim
// for the window's last replay, the read alone for the replays after it,
// the claim alone (no read) for a first execution after the window of
// first executions, and the claim for a replay after the window of claims
// in progress.
func ReplayPathFollowsTheMix(t *testing.T, s ReplayPathSteps, want ReplayPathWant) {
	t.Helper()
	firsts := func(prefix string, n int) {
		for i := range n {
			s.First(t, prefix+strconv.Itoa(i))
		}
	}
	check := func(point, want string, call func()) {
		t.Helper()
		if got := s.Sent(call); got != want {
			t.Fatalf("%s sent %q, want %q", point, got, want)
		}
	}
	replay := func() { s.Replay(t) }
	firsts("warm-", replaymix.Window) // a whole window, which also prepares what the store caches
	s.First(t, "done")                // the next window's first claim
	for range replaymix.Window - 2 {
		replay()
	}
	check("the window's last replay", want.LastReplay, replay)
	for i := range 5 * replaymix.Window {
		if i%16 == 15 {
			s.First(t, "mixed-"+strconv.Itoa(i))
			continue
		}
		check(fmt.Sprintf("claim %d after a window of replays, 15 in 16 replays since: a replay", i), want.AfterReplays, replay)
	}
	firsts("first-", replaymix.Window)
	check("after a window of first executions, a first execution", want.AfterFirsts, func() { s.First(t, "last") })
	s.Hold(t, "busy")
	for range replaymix.Window - 2 {
		s.Busy(t, "busy")
	}
	check("after a window of claims of an entry in progress, a replay", want.AfterBusy, replay)
}
