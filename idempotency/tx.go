package idempotency

import (
	"context"
	"log/slog"
	"net/http"
)

// serveTx runs the protected request in transactional mode: the claim, the
// handler's writes and the stored outcome commit together, and nothing of
// the handler's response is sent before the commit.
func (m *middleware) serveTx(w http.ResponseWriter, r *http.Request, f *flight, k Key, fp string) {
	var wt waiter
	for {
		tx, err := m.txStore.BeginTx(r.Context())
		if err != nil {
			m.storeFailed(w, r, k, err)
			return
		}
		res, err := tx.Claim(r.Context(), k, fp, m.cfg.ttl)
		if err != nil {
			m.rollback(context.WithoutCancel(r.Context()), k, tx)
			m.storeFailed(w, r, k, err)
			return
		}
		if res.Acquired {
			m.runTx(w, r, f, k, tx, res)
			return
		}
		// Never hold a transaction (and its locks) while answering or
		// waiting.
		m.rollback(context.WithoutCancel(r.Context()), k, tx)
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
	finished := false
	defer func() {
		if finished {
			return
		}
		ctx, cancel := context.WithTimeout(detached, m.cfg.storeTimeout)
		defer cancel()
		m.rollback(ctx, k, tx)
		ev.Outcome, ev.Err = OutcomeReleased, ErrHandlerPanicked
		m.emit(ev)
	}()
	f.claim = claimInfo{key: k, token: res.Token}
	ctx := tx.Context(withClaim(r.Context(), &f.claim))
	m.next.ServeHTTP(rec, r.WithContext(ctx))
	finished = true
	ev.Status = rec.statusCode()

	sctx, cancel := context.WithTimeout(detached, m.cfg.storeTimeout)
	defer cancel()
	if !storable(ev.Status) {
		m.rollback(sctx, k, tx)
		ev.Outcome = OutcomeReleased
		m.emit(ev)
		rec.flush()
		return
	}
	err := tx.Complete(sctx, k, res.Token, m.outcome(rec), m.cfg.ttl)
	if err == nil {
		err = tx.Commit(sctx)
	}
	if err != nil {
		m.rollback(sctx, k, tx)
		m.cfg.logger.LogAttrs(sctx, slog.LevelError, "idempotency: commit failed; the handler's work was rolled back and the client gets 503",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Int64("token", res.Token),
			slog.Int("status", ev.Status), slog.Any("error", err))
		clear(w.Header()) // the handler's headers describe a response that is not sent
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
// about one, and the store's own timeout frees the claim.
func (m *middleware) rollback(ctx context.Context, k Key, tx Tx) {
	if err := tx.Rollback(ctx); err != nil {
		m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: rollback failed",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
	}
}
