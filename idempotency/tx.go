package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
)

// errStorePanicked is the Err of the OutcomeStoreError event of a
// transactional request whose Complete or Commit panicked.
var errStorePanicked = errors.New("idempotency: store panicked while storing the outcome")

// serveTx runs the protected request in transactional mode: the claim, the
// handler's writes and the stored outcome commit together, and nothing of
// the handler's response is sent before the commit.
func (m *middleware) serveTx(w http.ResponseWriter, r *http.Request, f *flight, k Key, fp string) {
	var wt waiter
	defer wt.done(m)
	for {
		tx, err := m.txStore.BeginTx(r.Context())
		if err != nil {
			m.storeFailed(w, r, k, err)
			return
		}
		res, err := tx.Claim(r.Context(), k, fp, m.cfg.ttl)
		if err != nil {
			m.rollback(r.Context(), k, tx)
			m.storeFailed(w, r, k, err)
			return
		}
		if res.Acquired {
			m.runTx(w, r, f, k, tx, res)
			return
		}
		// Never hold a transaction (and its locks) while answering or
		// waiting.
		m.rollback(r.Context(), k, tx)
		if !m.refused(w, r, k, fp, res.Entry, &wt) {
			return
		}
	}
}

func (m *middleware) runTx(w http.ResponseWriter, r *http.Request, f *flight, k Key, tx Tx, res ClaimResult) {
	detached := context.WithoutCancel(r.Context())
	ev := Event{Key: k, Token: res.Token, TookOver: res.TookOver}
	// The whole response is buffered: nothing may reach the client before
	// the commit decides whether it happened.
	rec := &f.rec
	*rec = recorder{w: w, limit: m.cfg.maxResponse}
	finished := false // the handler returned
	settled := false  // tx was committed or rolled back
	defer func() {
		if settled {
			return
		}
		// A panic, in the handler or in the store: roll back so that neither
		// the transaction nor its connection outlives the request. The
		// panic goes on once this returns.
		m.rollback(detached, k, tx)
		ev.Outcome, ev.Err = OutcomeReleased, ErrHandlerPanicked
		if finished {
			ev.Outcome, ev.Err = OutcomeStoreError, errStorePanicked
		}
		m.emit(ev)
	}()
	// The handler's headers go into w's header map, among those set before
	// the Middleware ran; keep the latter to answer with if the commit fails.
	var outer http.Header
	if h := w.Header(); len(h) > 0 {
		outer = h.Clone()
	}
	f.claim = claimCtx{Context: r.Context(), key: k, token: res.Token}
	ctx := tx.Context(&f.claim)
	m.next.ServeHTTP(rec, r.WithContext(ctx))
	finished = true
	ev.Status = rec.statusCode()

	if !storable(ev.Status) {
		settled = true
		m.rollback(detached, k, tx)
		ev.Outcome = OutcomeReleased
		m.emit(ev)
		rec.flush()
		return
	}
	sctx, cancel := context.WithTimeout(detached, m.cfg.storeTimeout)
	defer cancel()
	err := tx.Complete(sctx, k, res.Token, m.outcome(rec), m.cfg.ttl)
	if err == nil {
		err = tx.Commit(sctx)
	}
	settled = true
	if err != nil {
		m.rollback(detached, k, tx)
		m.cfg.logger.LogAttrs(sctx, slog.LevelError, "idempotency: commit failed; the handler's work was rolled back and the client gets 503",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Int64("token", res.Token),
			slog.Int("status", ev.Status), slog.Any("error", err))
		// The handler's headers describe a response that is not sent.
		h := w.Header()
		clear(h)
		maps.Copy(h, outer)
		ev.Outcome, ev.Status, ev.Err = OutcomeStoreError, http.StatusServiceUnavailable, err
		m.emit(ev)
		writeProblem(w, problem{Type: ProblemCommitFailed, Status: http.StatusServiceUnavailable, Key: k.Key,
			Detail: "The operation could not be committed, so nothing was done. Retry with the same key."}, storeRetryAfter)
		return
	}
	ev.Outcome = OutcomeNew
	m.emit(ev)
	rec.flush()
}

// rollback rolls tx back, logging a failure: there is nothing else to do
// about one, and the store's own timeout frees the claim. It runs under a
// context of its own, detached from parent's cancellation (a client that left
// must not keep the transaction and its connection open) and bounded by the
// store timeout (a hung database must not hold the request), and fresh: a
// Commit that used up its own time must not leave the Rollback none.
func (m *middleware) rollback(parent context.Context, k Key, tx Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), m.cfg.storeTimeout)
	defer cancel()
	if err := tx.Rollback(ctx); err != nil {
		m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: rollback failed",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
	}
}
