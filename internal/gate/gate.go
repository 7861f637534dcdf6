// Package gate keeps a store's connection pool within reach of the calls
// that keep claims alive and record outcomes (Renew, Complete, Release:
// the settling calls). The request-path calls (Claim, Get, Watch) pass
// through a Gate; settling calls never wait in it, they only announce
// themselves. A request-path call enters while the calls inside, the
// settling ones included, leave a connection of the pool free, and while
// fewer than the gate's limit are inside. So a burst of requests, or of
// duplicates waiting for a result, never queues in the pool ahead of a
// settling call: the pool's next free connection goes to the settling
// call, whose wait is at most the rest of one request-path statement.
//
// A gate made with a reserve (NewReserving) also never lets the request
// path hold more than the pool less that reserve, for stores whose
// request-path calls may hold a connection for long (a Redis WAIT).
package gate

import (
	"context"
	"sync"
)

// Gate bounds how many request-path calls hold pool connections at once.
// Create it with New or NewReserving; the zero Gate is not usable. It is
// safe for concurrent use.
type Gate struct {
	mu       sync.Mutex
	size     int // connections in the pool, at least 1
	limit    int // request-path calls inside at most, at least 1
	inside   int // request-path calls that entered and have not left
	settling int // settling calls announced and not finished
	waiters  []chan struct{}
}

// New returns a Gate for a pool of poolSize connections whose request
// path may hold all of them while no settling call needs one.
func New(poolSize int) *Gate {
	return NewReserving(poolSize, 0)
}

// NewReserving returns a Gate for a pool of poolSize connections that
// keeps reserve of them, at most all but one, from the request path even
// when no settling call needs them.
func NewReserving(poolSize, reserve int) *Gate {
	size := max(poolSize, 1)
	return &Gate{size: size, limit: max(size-max(reserve, 0), 1)}
}

// Enter waits for a place, or returns ctx's error. Places are given in the
// order the calls came.
func (g *Gate) Enter(ctx context.Context) error {
	g.mu.Lock()
	if len(g.waiters) == 0 && g.room() {
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
// it never waits. Until the matching Settled, request-path calls enter only
// while a connection is left for it.
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

// Limit returns how many request-path calls may be inside at once while no
// settling call is in flight.
func (g *Gate) Limit() int { return g.limit }

// Load returns how many request-path calls are inside and how many
// settling calls are announced, as of the call.
func (g *Gate) Load() (inside, settling int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.settling
}

// room reports whether one more request-path call may enter. g.mu is held.
func (g *Gate) room() bool {
	return g.inside < g.limit && g.inside+g.settling < g.size
}

// admitLocked hands places to the waiters at the head of the queue while
// there is room. g.mu is held.
func (g *Gate) admitLocked() {
	for len(g.waiters) > 0 && g.room() {
		w := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		g.inside++
		w <- struct{}{} // never blocks: the channel is empty and has room for one
	}
}
