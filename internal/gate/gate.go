// Package gate keeps part of a store's connection pool within reach of the
// calls that keep claims alive and record outcomes (Renew, Complete,
// Release: the settling calls). The request-path calls (Claim, Get, Watch)
// pass through a Gate, which lets at most three quarters of the pool
// through at once, so that a burst of requests, or of duplicates waiting
// for a result, never holds or queues for the last quarter ahead of a
// settling call.
//
// A Gate given a count of the pool's free connections also lends that
// quarter: a request-path call may take one of its connections while more
// are free, right then, than settling calls are in flight (settling calls
// announce themselves with Settle and Settled, and never wait in the
// gate). A lent connection is one nobody waited for, so a settling call
// that comes later waits at most for the first request-path call to give
// its connection back; what the quarter was kept for still holds, and the
// request path uses the whole pool while nothing else needs it. (The count
// is read before the call takes its connection, so a call entering at
// that moment, or a user of the pool the gate does not see, can take the
// connection first; the lent call then waits for one in the pool, as a
// call within the three quarters may.)
package gate

import (
	"context"
	"sync"
)

// Gate bounds how many request-path calls hold pool connections at once.
// Create it with New; the zero Gate is not usable. It is safe for
// concurrent use.
type Gate struct {
	mu       sync.Mutex
	size     int        // connections in the pool, at least 1
	limit    int        // request-path calls inside without lending, at least 1
	free     func() int // the pool's free connections now, or nil: no lending
	inside   int        // request-path calls that entered and have not left
	settling int        // settling calls announced and not finished
	waiters  []chan struct{}
}

// New returns a Gate for a pool of poolSize connections that keeps a
// quarter of them, at least one and never all, from the request path.
// When free is not nil it lends them (see the package documentation):
// free returns how many connections of the pool are free now (idle, or
// not yet opened), and is called with the Gate's lock held, only when the
// request path has its three quarters.
func New(poolSize int, free func() int) *Gate {
	size := max(poolSize, 1)
	return &Gate{size: size, limit: max(size-max(size/4, 1), 1), free: free}
}

// Enter waits for a place, or returns ctx's error. Places are given in the
// order the calls came.
func (g *Gate) Enter(ctx context.Context) error {
	g.mu.Lock()
	if len(g.waiters) == 0 && g.room(0) {
		g.inside++
		g.mu.Unlock()
		return nil
	}
	w := waiterPool.Get().(chan struct{})
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	select {
	case <-w:
		waiterPool.Put(w)
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	for i, o := range g.waiters {
		if o == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			g.mu.Unlock()
			waiterPool.Put(w)
			return ctx.Err()
		}
	}
	// The place was handed over as ctx ended: give it back.
	<-w
	g.inside--
	g.admitLocked()
	g.mu.Unlock()
	waiterPool.Put(w)
	return ctx.Err()
}

// waiterPool holds the channels waiting calls are woken on: each has room
// for the one place handed to it, and is empty when put back.
var waiterPool = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// Leave gives a place back. Call it once for each Enter that succeeded.
func (g *Gate) Leave() {
	g.mu.Lock()
	g.inside--
	g.admitLocked()
	g.mu.Unlock()
}

// Settle announces a settling call about to take a connection of the pool;
// it never waits. Until the matching Settled, the Gate lends a connection
// only while one more than it is free.
func (g *Gate) Settle() {
	g.mu.Lock()
	g.settling++
	g.mu.Unlock()
}

// Settled ends what Settle announced. Call it once for each Settle, when
// the call has given its connection back.
func (g *Gate) Settled() {
	g.mu.Lock()
	g.settling--
	g.admitLocked()
	g.mu.Unlock()
}

// Limit returns how many request-path calls may be inside at once without
// lending.
func (g *Gate) Limit() int { return g.limit }

// Load returns how many request-path calls are inside, how many settling
// calls are announced, and how many request-path calls wait, as of the
// call.
func (g *Gate) Load() (inside, settling, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.settling, len(g.waiters)
}

// room reports whether one more request-path call may enter: within the
// limit, or on a lent connection, lent counting the connections just lent
// that the pool may not show taken yet. g.mu is held.
func (g *Gate) room(lent int) bool {
	if g.inside < g.limit {
		return true
	}
	return g.free != nil && g.inside < g.size && g.free()-lent > g.settling
}

// admitLocked hands places to the waiters at the head of the queue while
// there is room. g.mu is held.
func (g *Gate) admitLocked() {
	for lent := 0; len(g.waiters) > 0 && g.room(lent); {
		if g.inside >= g.limit {
			lent++
		}
		w := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		g.inside++
		w <- struct{}{} // never blocks: the channel is empty and has room for one
	}
}
