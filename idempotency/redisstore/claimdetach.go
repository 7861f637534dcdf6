package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/detach"
	"github.com/saferetry/saferetry/internal/gate"
)

// Drain waits until the Claims whose callers left while their script was
// on its way have had their answers, and have released the claims made
// for those callers, and returns nil; or it returns context.Cause(ctx)
// when ctx ends first. Call it at shutdown, after the server's Shutdown
// has returned (the requests have ended) and before closing the client:
//
//	_ = srv.Shutdown(ctx)
//	_ = store.Drain(ctx)
//	_ = rdb.Close()
//
// Such a Claim's script goes on after Claim returned, and a client closed
// under it loses its answer: the claim it made for nobody would stay held,
// every retry of its key answered "in progress", until its lease lapsed.
// Only a client that reads under the context's deadline
// (ContextTimeoutEnabled) leaves a script running behind its caller (see
// acquire); with another, Drain returns at once. Drain does not stop the
// Store: the Claims that start while it waits are waited for too. It is
// safe to call concurrently with any method, and more than once.
func (s *Store) Drain(ctx context.Context) error {
	return s.detached.Wait(ctx)
}

// acquire runs Claim's round trips that may acquire k, whose entry is
// named name, with the fingerprint in its stored form (encodeFingerprint)
// (the replay fast path's GET, then the claim script) to their answer, also when ctx ends
// while the script is on its way. Cut short by ctx (a client with
// ContextTimeoutEnabled reads under its deadline), a script that Redis ran
// would lose the claim's token with its answer: nobody could release it,
// and the key would stay held, every retry answered "in progress", for the
// whole lease; and go-redis lets no cancellation cut a read short, so a
// cancelled caller would wait for the answer all the same. So the script
// is sent and read under a context of its own, which ctx's end does not
// end, on a goroutine of its own when ctx can end (internal/detach), on a
// client that reads under ctx's deadline; on another (go-redis's default),
// whose reads ctx does not cut, on the caller's goroutine, which then
// returns with the answer, and releases a claim made for it if ctx ended.
// acquire returns with ctx, as the Store contract has it, and handed off
// (true) when it leaves the script running: the goroutine then waits for
// its answer (as long as the client's ReadTimeout lets any read wait),
// releases a claim acquired for the caller that left, and then lets go of
// g, the place that Claim entered (Claim must not); Drain waits for it. A
// Release that fails leaves the claim to lapse with its lease. On a
// client that reads under the context's deadline (ContextTimeoutEnabled),
// the round trips are read for a lease at most, after which a claim they
// made has lapsed: with no ReadTimeout, a lost connection would otherwise keep the goroutine, and
// g's place, for ever, where the caller's deadline used to end the read,
// and a few such Claims would fill g for every later one. (Another client
// reads under its ReadTimeout alone, as it did for the caller.) Under
// WithWait, a WAIT sent in a round trip of its own still waits under ctx
// (WithWait's own failure, which gives the claim back); one that shares
// the script's round trip cannot be told from it, and is read to its end.
// A panic in the round trips (a go-redis hook's) is raised again on the
// caller's goroutine, or, once it left, dropped there, where no recover
// could reach it; a claim whose answer came back before it is released
// (see acquireOn).
func (s *Store) acquire(ctx context.Context, g gate.Gate, k idempotency.Key, name, stored string, lease, ttl time.Duration) (res idempotency.ClaimResult, handedOff bool, err error) {
	if err := ctx.Err(); err != nil {
		return idempotency.ClaimResult{}, false, err // sent, the script would acquire for nobody
	}
	if ctx.Done() == nil {
		// ctx never ends: no answer can be lost to it.
		res, err := s.acquireOn(ctx, ctx, k, name, stored, lease, ttl)
		return res, false, err
	}
	if !s.deadlineReads {
		// The client reads under its ReadTimeout alone (go-redis's
		// default): ctx's end cuts no read, so no answer is lost to it,
		// and the round trips run on the caller's goroutine, which
		// returns when the answer arrives, as go-redis does. A goroutine
		// of their own would return at once when ctx ends, at the price of
		// a tenth or more of a first execution's throughput (measured with
		// a cancellable context against context.Background()). A claim
		// made for a caller whose ctx ended meanwhile is released.
		res, err := s.acquireOn(ctx, ctx, k, name, stored, lease, ttl)
		if ctx.Err() == nil || err != nil {
			return res, false, err
		}
		if res.Acquired {
			_ = s.Release(context.WithoutCancel(ctx), k, res.Token) // it failed: the claim lapses with its lease
		}
		return idempotency.ClaimResult{}, false, context.Cause(ctx)
	}
	sctx, cancel := context.WithoutCancel(ctx), func() {}
	if s.deadlineReads {
		sctx, cancel = context.WithTimeout(sctx, lease)
	}
	defer func() {
		if !handedOff {
			cancel() // also when the round trips panicked
		}
	}()
	return detach.Call(ctx, &s.detached, func() (idempotency.ClaimResult, error) {
		return s.acquireOn(ctx, sctx, k, name, stored, lease, ttl)
	}, func(res idempotency.ClaimResult, err error) {
		defer cancel()
		defer g.Leave()
		if err == nil && res.Acquired {
			_ = s.Release(sctx, k, res.Token) // it failed: the claim lapses with its lease
		}
	})
}

// acquireOn runs acquire's round trips, sent and read under sctx, with
// ctx for a WAIT of its own (see runSent). A panic in them (a go-redis
// hook's) after the claim script's answer came back releases the claim it
// made (see releaseSent), and goes on.
func (s *Store) acquireOn(ctx, sctx context.Context, k idempotency.Key, name, stored string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	var sent sentScript
	returned := false
	defer func() {
		if !returned {
			s.releaseSent(sctx, k, &sent)
		}
	}()
	res, err := s.claimOn(ctx, sctx, &sent, k, name, stored, lease, ttl)
	returned = true
	return res, err
}

// claimOn is acquireOn, with the claim script's command kept in sent.
func (s *Store) claimOn(ctx, sctx context.Context, sent *sentScript, k idempotency.Key, name, stored string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if s.replay.ReadFirst() {
		if e, ok, err := s.completedEntry(sctx, name); err != nil || ok {
			if err != nil {
				return idempotency.ClaimResult{}, err
			}
			s.replay.Observe(true)
			return idempotency.ClaimResult{Entry: e}, nil
		}
	}
	res, err := s.runSent(ctx, sctx, sent, claimScript, name, isAcquired,
		stored, s.leaseArg.box(micros(lease)), s.ttlArg.box(millis(ttl)))
	if errors.Is(err, ErrNotReplicated) && isAcquired(res) {
		s.undoClaim(sctx, k, res)
	}
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if tok, took, ok := acquired(res); ok {
		s.replay.Observe(false)
		// The script runs atomically and answers at once: the whole lease
		// is left when the answer leaves the server.
		return idempotency.ClaimResult{Acquired: true, Token: tok, TookOver: took, LeaseRemaining: lease.Truncate(time.Microsecond)}, nil
	}
	e, found, err := decodeEntry(res)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if !found {
		return idempotency.ClaimResult{}, errUnexpected(res)
	}
	s.replay.Observe(e.State == idempotency.StateCompleted)
	return idempotency.ClaimResult{Entry: e}, nil
}

// readsUnderDeadline reports whether rdb reads under a context's deadline
// (ContextTimeoutEnabled): go-redis reads under its ReadTimeout alone
// otherwise. A client of another type is taken to.
func readsUnderDeadline(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}
