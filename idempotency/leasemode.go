package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// leaseMode claims keys in a Store and holds each claim under a lease that
// a leaseKeeper renews until the outcome is recorded.
type leaseMode struct{ m *middleware }

func (l leaseMode) claim(q *request) (held, ClaimResult, error) {
	m := l.m
	sent := m.cfg.clock.Now()
	// The claim is kept for at least one lease whatever the TTL: an entry
	// that expired before its first renewal would let a duplicate run
	// beside a handler slower than a short TTL.
	res, err := m.store.Claim(q.r.Context(), q.claim.key, q.fp, m.cfg.lease, max(m.cfg.ttl, m.cfg.lease))
	if err != nil || !res.Acquired {
		// Made only for a claim it holds: a replay, a 409 or a 422 then
		// allocates half the bytes.
		return nil, res, err
	}
	c := &leaseClaim{}
	c.keeper.base = sent
	return c, res, nil
}

// leaseClaim is lease mode's hold of one claim.
type leaseClaim struct {
	keeper leaseKeeper
	store  storeCtx // bounds the store calls after the handler
	// The handler's context, cancelled (by the keeper) when the lease is
	// lost, is the one start returns, which the request keeps as its
	// claim's (claimCtx.Context); kept there alone, it keeps the claim in
	// the 224-byte size class, not 240.
}

// start refuses to run on a claim whose lease may lapse before its first
// renewal lands, and otherwise starts keeping the lease.
func (c *leaseClaim) start(q *request, res ClaimResult) (context.Context, bool) {
	m := q.m
	// The lease lasts at least until sent plus what the store said was left
	// when it answered, whenever in the round trip that was.
	left := res.LeaseRemaining
	if left == 0 || left > m.cfg.lease {
		left = m.cfg.lease
	}
	expires := int64(left)                                // from the claim's sending, as the keeper counts (see leaseKeeper.now)
	now := int64(clock.Since(m.cfg.clock, c.keeper.base)) // as the keeper reads it (see leaseKeeper.now)
	if remaining := clock.Between(now, expires); remaining < m.cfg.lease/2 {
		// The first renewal might not reach the store before the lease
		// lapses, and another instance could then run the handler beside
		// this one.
		q.claimTooLate(res.Token, remaining)
		return nil, false
	}
	if res.TookOver {
		// Should the logger panic, the request holds the claim and has
		// given no event: it gives its one event first, as after a
		// logger's panic while its outcome is recorded (see
		// request.settlePanicked), and the claim, which no keeper renews
		// yet, is left to its lease.
		logged := false
		defer func() {
			if !logged {
				q.settlePanicked(false, nil)
			}
		}()
		m.cfg.logger.LogAttrs(q.r.Context(), slog.LevelInfo, "idempotency: took over a claim whose lease lapsed",
			slog.String("scope", q.claim.key.Scope), slog.String("key", q.claim.key.Key), slog.Int64("token", res.Token))
		logged = true
	}
	q.rec = recorder{w: q.writer(), limit: m.cfg.maxResponse, canStream: true}
	hctx, cancelHandler := context.WithCancelCause(q.r.Context())
	c.store.parent = q.r.Context()
	c.keeper.start(q, now, expires, cancelHandler)
	return hctx, true
}

func (c *leaseClaim) handlerContext(cc *claimCtx) context.Context { return cc }

// finish stores the outcome, or releases the claim after a status that is
// not stored, while the keeper keeps the lease; then it sends the response.
// A claim that was taken over meanwhile gets the answer of superseded in
// place of a storable response, since the record is the newer holder's.
func (c *leaseClaim) finish(q *request) {
	ev, superseded, kept := c.record(q)
	if kept != nil {
		c.goOn(q, ev, superseded, kept)
	}
	switch {
	case superseded && storable(ev.Status) && q.rec.unsent():
		q.leaseLost(&c.store, ev, http.StatusConflict, ErrStaleToken, nil, q.superseded)
	case superseded:
		q.leaseLost(&c.store, ev, ev.Status, ErrStaleToken, nil, q.send)
	default:
		q.send()
	}
}

// goOn goes on with kept, the panic the keeper recovered, in place of the
// response, once the request has given its one event: a superseded
// claim's is ours to report, with the status sent, none unless it
// streamed. Should a hook panic on it, that panic goes on in kept's place,
// as a panic while the outcome is recorded does (see record), and kept is
// logged (see middleware.logDropped).
func (c *leaseClaim) goOn(q *request, ev Event, superseded bool, kept *keeperPanic) {
	if superseded {
		given := false
		defer func() {
			if !given {
				q.m.logDropped(&c.store, q.claim.key, kept)
			}
		}()
		q.leaseLost(&c.store, ev, q.sentStatus(), ErrStaleToken, nil, nil)
		given = true
	}
	panic(kept)
}

// record is finish's store call: it completes or releases the claim and
// reports whether it was superseded, then ends the claim, also when a store
// call or a hook panics: the keeper must not go on renewing a claim that
// nobody will settle. A panic before the request's event is given is
// reported as request.settlePanicked says; a hook's panic on the event
// lets the response go out first (see middleware.answer), unless a panic
// the keeper kept was to go on in its place. Once the outcome is
// recorded, a panic the keeper recovered on its timer is returned as kept,
// for finish to go on with once the request gave its event (see
// keeperPanic); before, one that a panic of the store's or the logger's
// goes on in place of is logged (see middleware.logDropped).
func (c *leaseClaim) record(q *request) (ev Event, superseded bool, kept *keeperPanic) {
	m := q.m
	recorded := false
	s := settling{keeper: &c.keeper, sent: q.sentStatus()}
	defer func() {
		p := c.end()
		if s.kept != nil { // the keeper was stopped before the event
			p = s.kept
		}
		if !recorded && !s.reported {
			q.settlePanicked(s.inStore, s.failed)
		}
		if !recorded && s.reported && s.kept == nil {
			// A hook panicked on the event, which the response it
			// describes follows all the same (see middleware.answer).
			m.unwinding(&c.store, q.claim.key, q.send)
		}
		if recorded {
			kept = p
		} else if p != nil {
			// The store's or the logger's panic goes on in its place.
			m.logDropped(&c.store, q.claim.key, p)
		}
	}()
	// A handler cancelled because its lease could not be confirmed was
	// asked to stop; if it wrote nothing, it did. One whose client left
	// may have done its work and answered with the implicit 200: that is
	// kept, since running it again would be the worse error.
	hctx := q.claim.Context // the handler's (see start)
	q.abandonedRun(hctx, errors.Is(context.Cause(hctx), ErrLeaseLost))
	superseded, now := c.keeper.settle(m.cfg.storeTimeout, &c.store)
	// The run as a duplicate sees it, the claim's round trip included;
	// no time of its own is kept, so that the claim stays in one 256-byte
	// allocation (TestRequestSizes).
	q.ran(time.Duration(now), hctx) // now counts from the claim's sending
	ev = q.event()
	ev.Status = q.rec.statusCode()
	switch {
	case superseded:
	case storable(ev.Status):
		resp, borrowed, held := m.outcome(&q.rec, q.r)
		defer restoreLength(resp.Header, held)
		superseded = m.complete(&c.store, ev, resp, &s)
		if borrowed {
			returnStoredHeaders(resp.Header)
		}
	default:
		ev.Outcome = OutcomeReleased
		if cause := context.Cause(hctx); errors.Is(cause, ErrLeaseLost) {
			ev.Err = cause
		}
		superseded = m.release(&c.store, ev, &s)
	}
	recorded = true
	return ev, superseded, nil
}

// abort releases the claim of a handler that panicked, so that a retry
// runs it again. Its event carries the status sent, the handler's if its
// response streamed before the panic, 0 otherwise. The handler's panic
// goes on as it was, in place of any the keeper recovered, which is
// logged (see middleware.logDropped): a panic while
// it releases (the store's Release, the logger) is dropped (see
// unwinding), the request's one event then reported as
// request.settlePanicked says, and so is a hook's panic on the event (see
// settling.emit).
func (c *leaseClaim) abort(q *request) {
	s := settling{unwinding: true}
	defer func() {
		if p := c.end(); p != nil {
			q.m.logDropped(&c.store, q.claim.key, p)
		}
		if !s.reported {
			q.settlePanicked(s.inStore, s.failed)
		}
	}()
	q.m.unwinding(&c.store, q.claim.key, func() { c.release(q, &s) })
}

// release is abort's release of the claim, as a store call of s.
func (c *leaseClaim) release(q *request, s *settling) {
	ev := q.event()
	ev.Status = q.sentStatus()
	if lost, _ := c.keeper.settle(q.m.cfg.storeTimeout, &c.store); lost {
		s.reported = true
		q.leaseLost(&c.store, ev, ev.Status, ErrStaleToken, s, nil)
		return // nothing of ours to release
	}
	ev.Outcome, ev.Err = OutcomeReleased, ErrHandlerPanicked
	if q.m.release(&c.store, ev, s) {
		q.leaseLost(&c.store, ev, ev.Status, ErrStaleToken, s, nil)
	}
}

// end stops the keeper and ends the claim's contexts. It returns the panic
// the keeper recovered on its timer, if any.
func (c *leaseClaim) end() *keeperPanic {
	p := c.keeper.stop()
	c.store.end()
	c.keeper.cancelHandler(nil)
	return p
}
