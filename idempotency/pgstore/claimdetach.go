package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/detach"
)

// Drain waits until the Claims whose callers left while their statements
// ran have had their answers, and have released the claims made for those
// callers, and returns nil; or it returns context.Cause(ctx) when ctx ends
// first. Call it at shutdown, after the server's Shutdown has returned
// (the requests have ended) and before Close and closing the pool:
//
//	_ = srv.Shutdown(ctx)
//	_ = store.Drain(ctx)
//	_ = store.Close()
//	pool.Close()
//
// Such a Claim's statements go on after Claim returned, and a claim they
// made for nobody is released on the pool: closed before, the pool refuses
// the release, and the key stays held, every retry answered 409, until its
// lease lapses. Drain does not stop the Store: the Claims that start while
// it waits are waited for too. It is safe to call concurrently with any
// method, and more than once.
func (s *Store) Drain(ctx context.Context) error {
	return s.detached.Wait(ctx)
}

// acquire runs Claim's statements that may acquire k (the upsert, then
// the claim statement, or the claim statement alone) to their answer,
// also when ctx ends while they run. Cut short by ctx, a statement that
// had committed its claim would lose the claim's token with its answer:
// nobody could release it, and the key would stay held, every retry
// answered 409, for the whole lease. So the statements run on a context
// of their own, which ctx's end does not cancel, on a goroutine of their
// own when ctx can end (internal/detach). acquire returns with ctx, as
// the Store contract has it (its deadline, or its cancellation, is
// honoured), and handed off (true) when it leaves the statements running:
// the goroutine then waits for their answer (at most the lease from then,
// after which the claim has lapsed anyway), releases a claim acquired for
// the caller that left, and then lets go of the place in the gate that
// Claim entered (Claim must not); Drain waits for it. The connection is
// had on ctx, so a caller that left waits for no connection. A Release that fails leaves
// the claim to lapse with its lease. A panic in the statements (a pgx
// tracer's) is raised again on the caller's goroutine, or, once it left,
// dropped there, where no recover could reach it; a claim whose answer
// came back before it is released (see acquireOn).
func (s *Store) acquire(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration, ttlUS int64) (res idempotency.ClaimResult, handedOff bool, err error) {
	if err := ctx.Err(); err != nil {
		return idempotency.ClaimResult{}, false, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return idempotency.ClaimResult{}, false, err
	}
	if ctx.Done() == nil {
		// ctx never ends: no answer can be lost to it.
		res, err := s.acquireOn(ctx, conn, k, fingerprint, lease, ttl, ttlUS)
		return res, false, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if handedOff {
			time.AfterFunc(lease, cancel) // the claim has lapsed by then
		} else {
			cancel() // also when the statements panicked
		}
	}()
	return detach.Call(ctx, &s.detached, func() (idempotency.ClaimResult, error) {
		return s.acquireOn(sctx, conn, k, fingerprint, lease, ttl, ttlUS)
	}, func(res idempotency.ClaimResult, err error) {
		defer cancel()
		defer s.gate.Leave()
		if err == nil && res.Acquired {
			_ = s.Release(sctx, k, res.Token) // it failed: the claim lapses with its lease
		}
	})
}

// acquireOn runs the statements of acquire on conn, and gives conn back
// to the pool when they end: before a Release, which takes a connection
// of its own. A panic in them (a pgx tracer's) after the claim
// statement's answer came back releases the claim it made (see
// releaseAnswered), and goes on.
func (s *Store) acquireOn(ctx context.Context, conn *pgxpool.Conn, k idempotency.Key, fingerprint string, lease, ttl time.Duration, ttlUS int64) (idempotency.ClaimResult, error) {
	var got claimAnswer
	returned := false
	defer func() {
		conn.Release()
		if !returned {
			s.releaseAnswered(ctx, k, &got)
		}
	}()
	res, err := s.claimOn(ctx, conn, &got, k, fingerprint, lease, ttl, ttlUS)
	returned = true
	return res, err
}

// claimOn is acquireOn on q, with each claim statement's answer kept in
// got.
func (s *Store) claimOn(ctx context.Context, q queryRower, got *claimAnswer, k idempotency.Key, fingerprint string, lease, ttl time.Duration, ttlUS int64) (idempotency.ClaimResult, error) {
	if s.upserts.ReadFirst() {
		res, err := upsertOnce(ctx, q, got, s.sql.upsert, k, fingerprint, lease, ttlUS)
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
	res, err := claim(ctx, q, got, s.sql.claim, k, fingerprint, lease, ttl, true)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	s.upserts.Observe(res.Acquired)
	s.replay.Observe(!res.Acquired && res.Entry.State == idempotency.StateCompleted)
	return res, nil
}
