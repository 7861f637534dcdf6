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

// Mix holds a store's choice of replay path and the counts it comes from.
// The zero value is not usable; use New. It is safe for concurrent use.
type Mix struct {
	mode Mode
	// enter and leave are replays per Window: at enter or more the next
	// window reads first, under leave it claims again, and in between it
	// keeps the path it had (so that a share near one threshold does not
	// flip the path every window).
	enter, leave uint64
	readFirst    atomic.Bool
	// counts is claims<<32 | replays of the window under way: one atomic
	// add per claim, and a claim that finds the window complete decides
	// (a window is Window claims, or a few more when claims race).
	counts atomic.Uint64
}

// New returns a Mix in mode. In Adaptive mode the path changes to reading
// first when at least a share enter of a window's claims were replays, and
// back when fewer than a share leave were; enter and leave are clamped to
// [0, 1] and leave to at most enter.
func New(mode Mode, enter, leave float64) *Mix {
	perWindow := func(share float64) uint64 {
		share = min(max(share, 0), 1)
		return uint64(share*Window + 0.5)
	}
	m := &Mix{mode: mode, enter: perWindow(enter), leave: perWindow(leave)}
	m.leave = min(m.leave, m.enter)
	return m
}

// ReadFirst reports whether the next claim should read the key first.
func (m *Mix) ReadFirst() bool {
	switch m.mode {
	case Always:
		return true
	case Never:
		return false
	}
	return m.readFirst.Load()
}

// Observe counts one answered claim; replay says whether it answered a
// completed entry (by either path). Claims that failed are not counted.
func (m *Mix) Observe(replay bool) {
	if m.mode != Adaptive {
		return
	}
	delta := uint64(1) << 32
	if replay {
		delta++
	}
	v := m.counts.Add(delta)
	claims, replays := v>>32, v&(1<<32-1)
	if claims < Window {
		return
	}
	// The window is complete. The claim that empties the counts decides,
	// on exactly the claims it empties; when another claim was counted in
	// between, the swap fails and that claim (whose own count is at least
	// Window too) tries in its turn, so nothing is counted twice or lost.
	if !m.counts.CompareAndSwap(v, 0) {
		return
	}
	switch {
	case replays*Window >= m.enter*claims:
		m.readFirst.Store(true)
	case replays*Window < m.leave*claims:
		m.readFirst.Store(false)
	}
}
