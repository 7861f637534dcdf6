package pgstore

import "context"

// gate bounds how many request-path calls (Claim, Get) hold pool
// connections at once, so that the rest of the pool stays free for the
// calls that keep claims alive and record outcomes (Renew, Complete,
// Release): a burst of requests, or of duplicates waiting for a result,
// must never make a running request's renewal wait for a connection until
// its lease lapses.
type gate chan struct{}

// newGate returns a gate for a pool of maxConns connections: a quarter of
// them, at least one, is kept for renewals and completions.
func newGate(maxConns int) gate {
	reserved := max(maxConns/4, 1)
	return make(gate, max(maxConns-reserved, 1))
}

// enter waits for a place, or returns ctx's error.
func (g gate) enter(ctx context.Context) error {
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

// leave gives a place back.
func (g gate) leave() { <-g }
