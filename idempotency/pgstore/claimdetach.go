package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// acquire runs Claim's statements that may acquire k (the upsert, then
// the claim statement, or the claim statement alone) to their answer,
// also when ctx ends while they run. Cut short by ctx, a statement that
// had committed its claim would lose the claim's token with its answer:
// nobody could release it, and the key would stay held, every retry
// answered 409, for the whole lease. Run to its answer, a claim that
// acquired for a caller that left is released at once. The wait is
// bounded by the lease, after which the claim has lapsed anyway; the
// connection is had on ctx, so a caller that left waits for no
// connection. When ctx ended, acquire returns its error and holds
// nothing (unless the release failed: the claim then lapses with its
// lease).
func (s *Store) acquire(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration, ttlUS int64) (idempotency.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.ClaimResult{}, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease)
	defer cancel()
	res, err := s.acquireOn(sctx, conn, k, fingerprint, lease, ttl, ttlUS)
	conn.Release() // before the Release below, which takes a connection of its own
	if ctx.Err() == nil {
		return res, err
	}
	if err == nil && res.Acquired {
		_ = s.Release(sctx, k, res.Token) // it failed: the claim lapses with its lease
	}
	return idempotency.ClaimResult{}, context.Cause(ctx)
}

// acquireOn runs the statements of acquire on q.
func (s *Store) acquireOn(ctx context.Context, q queryRower, k idempotency.Key, fingerprint string, lease, ttl time.Duration, ttlUS int64) (idempotency.ClaimResult, error) {
	if s.upserts.ReadFirst() {
		res, err := claimOnce(ctx, q, s.sql.upsert, k, fingerprint, lease, ttlUS)
		switch {
		case err == nil:
			s.upserts.Observe(true)
			s.replay.Observe(false)
			return res, nil
		case !errors.Is(err, errLostRace) && !serializationFailure(err):
			return idempotency.ClaimResult{}, err
		}
		// A row stands in the way, or changed after the upsert's
		// snapshot: the claim statement answers (one round trip more).
	}
	res, err := claim(ctx, q, s.sql.claim, k, fingerprint, lease, ttl, true)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	s.upserts.Observe(res.Acquired)
	s.replay.Observe(!res.Acquired && res.Entry.State == idempotency.StateCompleted)
	return res, nil
}
