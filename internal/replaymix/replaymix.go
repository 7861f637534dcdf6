// Package replaymix decides, from the claims a store answered lately,
// whether its Claim should read the key before claiming it (the replay fast
// path): a read answers a replay for less than the claim costs, and costs a
// first execution one round trip more, so it pays only when replays are a
// large enough share of the claims.
//
// It guarantees nothing about answers, only about cost: a store uses it to
// choose between two paths that give the same answer in every state (each
// store's FastPathAnswers test holds them equal), so a wrong or stale
// decision makes a claim slower, never different. A process restart starts
// it again on the claim path.
//
// A Mix counts whatever share of claims a store observes. pgstore keeps a
// second one of the claims that acquired their key, and ReadFirst of that
// one tells it to begin its claims with a statement that only inserts (the
// upsert in lease mode, a plain INSERT in transactional mode; see
// pgstore's package documentation): the same guarantee, answers
// unchanged, only the cost.
package replaymix

import "sync/atomic"

// Window is how many claims one decision looks at: after every Window
// claims, the share of replays among them decides the path of the next
// Window claims.
const Window = 64

// Mode is how a store chooses its replay path.
type Mode uint8

const (
	// Adaptive reads first while replays are frequent (see Mix), and
	// claims straight away otherwise. It starts on the claim path.
	Adaptive Mode = iota
	// Always reads first on every claim.
	Always
	// Never claims straight away on every claim.
	Never
)

// The layout of Mix.state: the path chosen, and the counts of the window
// under way.
const (
	readFirstBit = uint64(1) << 63
	claimShift   = 32
	countMask    = uint64(1)<<31 - 1 // claims (bits 32-62) and replays (bits 0-30)
)

// Mix holds a store's choice of replay path and the counts it comes from.
// The zero value is not usable; use New. It is safe for concurrent use.
type Mix struct {
	mode Mode
	// enter and leave are shares of replays: at enter or more the next
	// window reads first, under leave it claims again, and in between it
	// keeps the path it had (so that a share near one threshold does not
	// flip the path every window).
	enter, leave float64
	// state is readFirstBit | claims<<claimShift | replays: the path and
	// the window under way in one word, so that one atomic add counts a
	// claim, and the claim that ends a window sets the path and empties
	// the counts in one swap (a window's decision can then never land
	// after the next window's).
	state atomic.Uint64
	// decided counts the claims of the windows decided, for tests: with
	// the claims still counted in state, it adds up to every claim
	// observed.
	decided atomic.Uint64
}

// New returns a Mix in mode. In Adaptive mode the path changes to reading
// first when at least a share enter of a window's claims were replays, and
// back when fewer than a share leave were; enter and leave are clamped to
// [0, 1] and leave to at most enter.
func New(mode Mode, enter, leave float64) *Mix {
	enter = min(max(enter, 0), 1)
	leave = min(max(leave, 0), enter)
	return &Mix{mode: mode, enter: enter, leave: leave}
}

// ReadFirst reports whether the next claim should read the key first.
func (m *Mix) ReadFirst() bool {
	switch m.mode {
	case Always:
		return true
	case Never:
		return false
	}
	return m.state.Load()&readFirstBit != 0
}

// Observe counts one answered claim; replay says whether it answered a
// completed entry (by either path). Claims that failed are not counted.
func (m *Mix) Observe(replay bool) {
	if m.mode != Adaptive {
		return
	}
	delta := uint64(1) << claimShift
	if replay {
		delta++
	}
	v := m.state.Add(delta)
	claims, replays := v>>claimShift&countMask, v&countMask
	if claims < Window {
		return
	}
	// The window is complete. The claim that empties the counts decides,
	// on exactly the claims it empties; when another claim was counted in
	// between, the swap fails and that claim (whose own count is at least
	// Window too) tries in its turn, so nothing is counted twice or lost.
	next := uint64(0)
	if m.decide(v&readFirstBit != 0, claims, replays) {
		next = readFirstBit
	}
	if m.state.CompareAndSwap(v, next) {
		m.decided.Add(claims)
	}
}

// decide returns the path after a window of claims of which replays were
// replays, on the path readFirst.
func (m *Mix) decide(readFirst bool, claims, replays uint64) bool {
	share := float64(replays) / float64(claims)
	switch {
	case share >= m.enter:
		return true
	case share < m.leave:
		return false
	}
	return readFirst
}
