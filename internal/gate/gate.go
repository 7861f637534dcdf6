// Package gate keeps part of a store's connection pool free for the calls
// that keep claims alive and record outcomes (Renew, Complete, Release):
// the request-path calls (Claim, Get) pass through a Gate, which lets at
// most three quarters of the pool through at once. A burst of requests, or
// of duplicates waiting for a result, then never makes a running request's
// renewal wait for a connection until its lease lapses.
package gate

import "context"

// Gate bounds how many request-path calls hold pool connections at once.
// Create it with New; the zero Gate lets nothing through. It is safe for
// concurrent use.
type Gate chan struct{}

// New returns a Gate for a pool of poolSize connections: a quarter of them,
// at least one, is kept for the other calls, and at least one call passes.
func New(poolSize int) Gate {
	reserved := max(poolSize/4, 1)
	return make(Gate, max(poolSize-reserved, 1))
}

// Enter waits for a place, or returns ctx's error.
func (g Gate) Enter(ctx context.Context) error {
	select {
	case g <- struct{}{}:
		return nil
	default:
	}
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave gives a place back. Call it once for each Enter that succeeded.
func (g Gate) Leave() { <-g }

// Cap returns how many calls may pass at once.
func (g Gate) Cap() int { return cap(g) }

// InUse returns how many calls are in the gate: those that entered and
// have not left yet.
func (g Gate) InUse() int { return len(g) }
