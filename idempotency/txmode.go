package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// errStorePanicked is the Err of the OutcomeStoreError event of a request
// whose store panicked: while it asked about its key (see
// request.askPanicked), or while its outcome was recorded (a transactional
// request's Complete, Commit or Rollback, a lease-mode request's Complete,
// Release or Get).
var errStorePanicked = errors.New("idempotency: store panicked")

// txMode runs each protected request in one transaction of a TxStore: the
// claim, the handler's writes and the stored outcome commit together, and
// nothing of the handler's response is sent before the commit.
type txMode struct {
	m     *middleware
	store TxStore
}

func (t txMode) claim(q *request) (held, ClaimResult, error) {
	sent := t.m.cfg.clock.Now()
	tx, err := t.store.BeginTx(q.r.Context())
	if err != nil {
		return nil, ClaimResult{}, err
	}
	claimed := false
	defer func() {
		if !claimed {
			// The store's Claim panicked: as after a Commit that panics,
			// neither the transaction nor its connection outlives the
			// request. The Claim's panic goes on as it was (see
			// rollbackUnwinding).
			t.m.rollbackUnwinding(q.r.Context(), q.claim.key, tx, nil)
		}
	}()
	res, err := tx.Claim(q.r.Context(), q.claim.key, q.fp, t.m.cfg.ttl)
	claimed = true
	if err != nil {
		t.m.rollback(q.r.Context(), q.claim.key, tx, nil)
		return nil, ClaimResult{}, err
	}
	if !res.Acquired {
		// Never hold a transaction (and its locks) while answering or
		// waiting.
		t.m.rollback(q.r.Context(), q.claim.key, tx, nil)
		return nil, res, nil
	}
	q.tx = &txClaim{tx: tx, sent: sent}
	return q.tx, res, nil
}

// txClaim is transactional mode's hold of one claim.
type txClaim struct {
	tx   Tx
	sent time.Time // when the claim was asked for (BeginTx), as lease mode counts a run
}

func (c *txClaim) start(q *request, res ClaimResult) (context.Context, bool) {
	// The whole response is buffered: nothing may reach the client before
	// the commit decides whether it happened.
	q.rec = recorder{w: q.writer(), limit: q.m.cfg.maxResponse}
	return q.r.Context(), true
}

func (c *txClaim) handlerContext(cc *claimCtx) context.Context { return c.tx.Context(cc) }

// abort rolls back the transaction of a handler that panicked. The
// handler's panic goes on as it was: a panic while it rolls back (the
// store's Rollback, the logger) is dropped (see
// middleware.rollbackUnwinding), the request's one event then reported as
// request.settlePanicked says, and so is a hook's panic on the event (see
// middleware.emitUnwinding).
func (c *txClaim) abort(q *request) {
	var s settling
	if q.m.rollbackUnwinding(q.r.Context(), q.claim.key, c.tx, &s) {
		q.settlePanicked(s.inStore, nil)
		return
	}
	ev := q.event()
	ev.Outcome, ev.Err = OutcomeReleased, ErrHandlerPanicked
	q.m.emitUnwinding(ev) // the handler's panic goes on, not a hook's
}

// finish stores the outcome and commits, or rolls back after a status that
// is not stored; a failed commit is answered 503, since nothing was kept.
// A response the store cannot keep (ErrResponseNotStorable from Complete)
// is stored as not replayable in its place, and committed.
func (c *txClaim) finish(q *request) {
	m := q.m
	q.ran(m.cfg.clock.Now().Sub(c.sent), q.r.Context())
	// Whatever ended the context, the rollback undoes what the handler
	// wrote, so nothing it did is kept to contradict the 503.
	q.abandonedRun(q.r.Context(), q.r.Context().Err() != nil)
	detached := context.WithoutCancel(q.r.Context())
	ev := q.event()
	ev.Status = q.rec.statusCode()
	if !storable(ev.Status) {
		c.rollback(q)
		ev.Outcome = OutcomeReleased
		m.answer(ev, nil, q.send)
		return
	}
	var s settling
	defer func() {
		if !s.reported {
			// The store or the logger panicked: roll back so that neither
			// the transaction nor its connection outlives the request. That
			// panic goes on as it was, not one of the rollback's, which is
			// dropped (see middleware.rollbackUnwinding), reported as
			// request.settlePanicked says: the event goes first. Nothing
			// was sent: the response is buffered.
			byStore := s.inStore
			m.rollbackUnwinding(detached, q.claim.key, c.tx, &s)
			q.settlePanicked(byStore || s.inStore, nil)
		}
	}()
	sctx, cancel := context.WithTimeout(detached, m.cfg.storeTimeout)
	defer cancel()
	resp, borrowed, held := m.outcome(&q.rec, q.r)
	defer restoreLength(resp.Header, held) // should Complete panic
	err := s.call(func() error { return c.tx.Complete(sctx, q.claim.key, q.claim.token, resp, m.cfg.ttl) })
	if borrowed {
		returnStoredHeaders(resp.Header)
	}
	restoreLength(resp.Header, held) // before the answer goes out, below
	if errors.Is(err, ErrResponseNotStorable) && !resp.Oversize {
		// As in lease mode: the handler's writes commit with a record that
		// retries answer 410, rather than roll back for ever.
		m.cfg.logger.LogAttrs(sctx, slog.LevelWarn, "idempotency: the store cannot keep this response; recording the operation as completed but not replayable",
			slog.String("scope", q.claim.key.Scope), slog.String("key", q.claim.key.Key), slog.Int64("token", q.claim.token), slog.Any("error", err))
		err = s.call(func() error {
			return c.tx.Complete(sctx, q.claim.key, q.claim.token, Response{Status: resp.Status, Oversize: true}, m.cfg.ttl)
		})
	}
	if err == nil {
		err = s.call(func() error { return c.tx.Commit(sctx) })
	}
	s.reported = true
	if err != nil {
		c.commitFailed(q, ev, err)
		return
	}
	ev.Outcome = OutcomeNew
	m.answer(ev, nil, q.send)
}

// commitFailed rolls back and answers 503: the client never sees a success
// that was not kept. A COMMIT that got no answer may have gone through;
// the retry with the same key then replays its outcome.
func (c *txClaim) commitFailed(q *request, ev Event, err error) {
	m := q.m
	c.rollback(q)
	handlerStatus := ev.Status
	// The handler's headers describe a response that is not sent.
	q.answerInPlace()
	ev.Outcome, ev.Status, ev.Err = OutcomeStoreError, http.StatusServiceUnavailable, err
	m.emitAfterLog(ev, 0, nil, func() {
		m.cfg.logger.LogAttrs(q.r.Context(), slog.LevelError, "idempotency: commit failed or not confirmed; the handler's work was rolled back unless the commit went through, and the client gets 503",
			slog.String("scope", q.claim.key.Scope), slog.String("key", q.claim.key.Key), slog.Int64("token", q.claim.token),
			slog.Int("status", handlerStatus), slog.Any("error", err))
	}, func() {
		q.answered = true
		detail := "The operation could not be committed, or its commit was not confirmed. Retry with the same key: a committed operation is replayed, one that was not runs again."
		if errors.Is(err, ErrRecordedNotReplayable) {
			detail = "The operation could not be committed as a whole: part of it was committed, and it is recorded as completed but not replayable. A retry with the same key gets 410 (ProblemResponseTooLarge); the operation will not run again."
		}
		writeProblem(q.writer(), problem{Type: ProblemCommitFailed, Status: http.StatusServiceUnavailable, Key: q.claim.key.Key, Detail: detail}, storeRetryAfter)
	})
}

// rollback rolls c's transaction back (see middleware.rollback) where no
// panic is in flight (after a panic, see middleware.rollbackUnwinding). A
// panic while it does (the store's Rollback, the logger) goes on, reported
// as request.settlePanicked says, so that the request gives its one event:
// the caller reports it after the rollback.
func (c *txClaim) rollback(q *request) {
	done := false
	var s settling
	defer func() {
		if !done {
			q.settlePanicked(s.inStore, nil)
		}
	}()
	q.m.rollback(context.WithoutCancel(q.r.Context()), q.claim.key, c.tx, &s)
	done = true
}

// rollback rolls tx back, logging a failure: there is nothing else to do
// about one, and the store's own timeout frees the claim. It runs under a
// context of its own, detached from parent's cancellation (a client that left
// must not keep the transaction and its connection open) and bounded by the
// store timeout (a hung database must not hold the request), and fresh: a
// Commit that used up its own time must not leave the Rollback none. The
// Rollback is a store call of s (see settling), which may be nil.
func (m *middleware) rollback(parent context.Context, k Key, tx Tx, s *settling) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), m.cfg.storeTimeout)
	defer cancel()
	if err := s.call(func() error { return tx.Rollback(ctx) }); err != nil {
		m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: rollback failed",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
	}
}

// rollbackUnwinding rolls tx back (see rollback) while a panic goes on
// (the store's, the logger's, the handler's), one that it did not raise: a
// panic of the rollback's own (the store's Rollback, the logger) is
// dropped (see unwinding). It reports whether the rollback panicked; s,
// the settling of the rollback's store call (see rollback), then tells by
// inStore whether the panic was the store's.
func (m *middleware) rollbackUnwinding(parent context.Context, k Key, tx Tx, s *settling) (panicked bool) {
	return m.unwinding(parent, k, func() { m.rollback(parent, k, tx, s) })
}
