package detach

import (
	"context"
	"sync"
)

// Group counts the calls that Call runs for it, until each has ended and
// its left has returned, so that a store can wait at shutdown for the
// calls whose callers left: one still on its way when the client it runs
// on is closed fails, and the claim it makes for a caller that left is
// not released, the key held for the whole lease. Wait waits for them.
//
// The zero value is an empty Group. A Group is safe for concurrent use by
// multiple goroutines, and must not be copied after first use.
type Group struct {
	mu   sync.Mutex
	n    int           // calls running
	idle chan struct{} // closed when n comes to 0; made by Wait while n > 0
}

// add counts a call that starts.
func (g *Group) add() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
}

// done counts a call that ended, left included, and wakes Wait when it
// was the last.
func (g *Group) done() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// Wait returns nil once no call of g runs (at once when none does), or
// context.Cause(ctx) when ctx ends first. Calls that start while it waits
// are waited for too.
func (g *Group) Wait(ctx context.Context) error {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return nil
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
