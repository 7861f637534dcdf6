package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/saferetry/saferetry/internal/contract"
)

// Pacing of the retries of a Complete or Release that failed: from 10 ms,
// doubling, at most 500 ms apart, until the store timeout ends them.
const (
	settleRetryFirst = 10 * time.Millisecond
	settleRetryMax   = 500 * time.Millisecond
)

// complete stores resp as the outcome of ev's claim and reports ev, or what
// went wrong instead; superseded reports that the claim was taken over
// (ErrStaleToken), which the caller reports once it knows what it answers.
// A transient store error is retried until ctx ends, with the token check
// kept, so that a short outage does not leave the key in progress until
// its lease lapses (and the next retry runs the handler again). A response
// the store cannot keep is recorded as not replayable.
func (m *middleware) complete(ctx context.Context, ev Event, resp Response, s *settling) (superseded bool) {
	k, token := ev.Key, ev.Token
	err, retried := m.retryStore(ctx, ev, "complete", s, func(ctx context.Context) error {
		return m.store.Complete(ctx, k, token, resp, m.cfg.ttl)
	})
	if errors.Is(err, ErrResponseNotStorable) && !resp.Oversize {
		m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the store cannot keep this response; recording the operation as completed but not replayable",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Int64("token", token), slog.Any("error", err))
		marker := Response{Status: resp.Status, Oversize: true}
		var again bool
		err, again = m.retryStore(ctx, ev, "complete", s, func(ctx context.Context) error {
			return m.store.Complete(ctx, k, token, marker, m.cfg.ttl)
		})
		retried = retried || again
	}
	ev.Outcome = OutcomeNew // what settled reports if it is stored
	return m.settled(ctx, ev, true, err, retried, "idempotency: storing the outcome failed; the response is sent anyway", s)
}

// release releases ev's claim and reports ev, or what went wrong instead,
// retrying transient store errors like complete, and reporting like it
// whether the claim was superseded.
func (m *middleware) release(ctx context.Context, ev Event, s *settling) (superseded bool) {
	k, token := ev.Key, ev.Token
	err, retried := m.retryStore(ctx, ev, "release", s, func(ctx context.Context) error {
		return m.store.Release(ctx, k, token)
	})
	return m.settled(ctx, ev, false, err, retried, "idempotency: releasing the claim failed; the key stays blocked until its lease lapses", s)
}

// settled ends complete and release (completed tells which), given the
// last store call's answer err: on success it reports ev; on ErrStaleToken
// it reports nothing and returns superseded, for the caller to report; on
// any other error it reports the failure with the message failed. A
// retry's ErrStaleToken is a success when the entry shows that an earlier
// try took effect though its answer was lost (settledAs). It sets
// s.reported once the store calls are over, when ev or its failure is
// reported or superseded is returned for the caller to report: a panic
// before that is the caller's to report (see request.settlePanicked).
func (m *middleware) settled(ctx context.Context, ev Event, completed bool, err error, retried bool, failed string, s *settling) (superseded bool) {
	if errors.Is(err, ErrStaleToken) && retried && m.settledAs(ctx, ev, completed, s) {
		err = nil
	}
	switch {
	case err == nil:
		s.over(&ev)
		s.reported = true
		s.emit(m, ev)
	case errors.Is(err, ErrStaleToken):
		s.reported = true
		return true
	default:
		s.over(&ev)
		m.afterRunFailed(ctx, ev, failed, err, s)
	}
	return false
}

// settling is what the recording of a request's outcome (complete,
// release, a transaction's commit or rollback) leaves for the deferred
// code that sees a panic go through it: whether the request's event was
// given, and whether the panic is the store's (see
// request.settlePanicked). It lives on its request's goroutine only.
type settling struct {
	// reported: the store calls are over and the event was given, or is
	// left to the caller to give (a claim found superseded).
	reported bool
	// inStore: a store call is running; a panic now is the store's.
	inStore bool
	// unwinding: the handler's panic is in flight (see leaseClaim.abort),
	// which no later panic replaces: not a hook's on the event (see emit),
	// nor the store's or the logger's (see unwinding).
	unwinding bool
	// failed is the store's error when the store calls failed and the
	// failure is being reported (see middleware.afterRunFailed).
	failed error
	// keeper is, in lease mode, the claim's lease keeper, stopped by over
	// once the store calls are done, before the event is given; kept is
	// the panic it kept, which goes on in place of the response (see
	// keeperPanic), so that the event has the status sent before (sent).
	keeper *leaseKeeper
	kept   *keeperPanic
	sent   int
}

// over ends the store calls: the keeper, if any, is stopped, and ev's
// status is the one sent before when a panic it kept goes on in place of
// the response.
func (s *settling) over(ev *Event) {
	if s.keeper == nil {
		return
	}
	s.kept, s.keeper = s.keeper.stop(), nil
	if s.kept != nil {
		ev.Status = s.sent
	}
}

// emit gives ev (see middleware.emit); while the handler's panic is in
// flight (unwinding), as middleware.emitUnwinding does, so that the
// handler's panic goes on, not a hook's. A nil s only gives ev.
func (s *settling) emit(m *middleware, ev Event) {
	if s != nil && s.unwinding {
		m.emitUnwinding(ev)
		return
	}
	m.emit(ev)
}

// call runs f, a store call: a panic while it runs is the store's. A nil
// s only runs f.
func (s *settling) call(f func() error) error {
	if s == nil {
		return f()
	}
	s.inStore = true
	err := f()
	s.inStore = false
	return err
}

// errRecordPanicked is the Err of the OutcomeReleased event of a request
// that panicked in code that is not the store's while it held its claim,
// outside its handler: while its outcome was recorded (the Middleware's
// logger, say), or on taking over a lapsed claim (see
// request.settlePanicked).
var errRecordPanicked = errors.New("idempotency: panicked while holding the claim, outside the handler and the store; the outcome is not stored")

// settlePanicked reports a request whose recording of its outcome panicked
// before its event was given (or, in lease mode, whose logger panicked on
// taking over a lapsed claim, before its handler ran), so that it gives its
// one event before the panic goes on: the claim is left to its lease, or
// the transaction rolled back. A panic of the store's (byStore) is OutcomeStoreError, and so is
// one while a failure of the store's (failed, non-nil) was being reported,
// with that failure as Err. Any other,
// a panic of the application's code that the Middleware calls meanwhile
// (its logger), is reported as a handler's panic is, OutcomeReleased with
// the Err errRecordPanicked: as after a handler's panic, the request failed
// with a panic that is not the store's, and its outcome is not stored, so
// a retry runs the handler again (once the lease lapses, unless an earlier
// Complete whose answer was lost took effect: the retry then replays it).
// Labelling it store_error would send whoever reads the metrics to a store
// that answered. Its status is the one sent, 0 when nothing was. A hook's
// panic does not replace the one in flight (see
// middleware.emitUnwinding).
func (q *request) settlePanicked(byStore bool, failed error) {
	ev := q.event()
	switch {
	case byStore:
		ev.Outcome, ev.Err = OutcomeStoreError, errStorePanicked
	case failed != nil:
		ev.Outcome, ev.Err = OutcomeStoreError, failed
	default:
		ev.Outcome, ev.Err = OutcomeReleased, errRecordPanicked
	}
	ev.Status = q.sentStatus()
	q.m.emitUnwinding(ev)
}

// sentStatus is the status that went out to the client: the handler's
// once its response streamed (see recorder.unsent), 0 before.
func (q *request) sentStatus() int {
	if q.rec.unsent() {
		return 0
	}
	return q.rec.statusCode()
}

// retryStore runs call until it succeeds, answers ErrStaleToken or
// ErrResponseNotStorable (final answers), or ctx ends, each try as a store
// call of s. retried reports that an earlier try failed after it may have
// reached the store.
func (m *middleware) retryStore(ctx context.Context, ev Event, op string, s *settling, call func(context.Context) error) (err error, retried bool) {
	delay := settleRetryFirst
	for {
		err = s.call(func() error { return call(ctx) })
		if err == nil || errors.Is(err, ErrStaleToken) || errors.Is(err, ErrResponseNotStorable) || ctx.Err() != nil {
			return err, retried
		}
		m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: store call failed after the handler ran; retrying",
			slog.String("op", op), slog.String("scope", ev.Key.Scope), slog.String("key", ev.Key.Key),
			slog.Int64("token", ev.Token), slog.Duration("retry_in", delay), slog.Any("error", err))
		retried = true
		t := m.cfg.clock.NewTimer(delay)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return err, retried
		}
		delay = min(2*delay, settleRetryMax)
	}
}

// settledAs reports whether the entry of ev's claim shows that an earlier
// Complete (completed true) or Release (completed false) with its token
// took effect, though its answer was lost: completed with that token, or no
// longer held by it. Its Get is retried on transient store errors, like the
// call it checks, until ctx ends: a blip of the store that lost an answer
// often fails the next call too. An entry it cannot read by then counts as
// not settled: the claim is taken for taken over (see OutcomeLeaseLost).
func (m *middleware) settledAs(ctx context.Context, ev Event, completed bool, s *settling) bool {
	var e Entry
	var found bool
	err, _ := m.retryStore(ctx, ev, "get", s, func(ctx context.Context) (err error) {
		e, found, err = m.store.Get(ctx, ev.Key)
		return err
	})
	if err != nil {
		return false
	}
	if completed {
		return found && e.State == StateCompleted && e.Token == ev.Token
	}
	return !found || e.Token != ev.Token || e.State != StateInProgress
}

// outcome is the Response to store for what rec recorded in answer to r:
// not replayable when it is oversize or did not reach its client whole
// (see recorder.notWhole). When borrowed, its Header goes back with
// returnStoredHeaders once the store has answered; when held is not nil,
// it goes back into that Header, the handler's own, with restoreLength
// (see storedHeaders).
func (m *middleware) outcome(rec *recorder, r *http.Request) (resp Response, borrowed bool, held []string) {
	if rec.oversize || rec.notWhole(r) {
		return Response{Status: rec.statusCode(), Oversize: true}, false, nil
	}
	n := rec.sentLength() // read before storedHeaders may take the field out
	h, borrowed, held := m.cfg.storedHeaders(rec.w.Header())
	if n >= 0 && r.Method == http.MethodHead {
		// The length of an answer to HEAD is the one its handler declared,
		// what a GET would get, not that of the bytes it wrote (which no
		// client sees): it is kept for the replays (see request.replay).
		// A name that is never replayed is never in h as the handler's
		// own map (see storedHeaders): h is borrowed, or nil, or the
		// handler's without its Content-Length, which goes back over this
		// one (held).
		if h == nil {
			h, borrowed = storedHeaderMaps.Get().(http.Header), true
		}
		h["Content-Length"] = []string{strconv.FormatInt(n, 10)}
	}
	return Response{Status: rec.statusCode(), Header: h, Body: rec.buf}, borrowed, held
}

// storable reports whether an outcome with this status is stored: the
// contract's table (server errors and the two "try again" client errors are
// not, so that a retry runs).
func storable(status int) bool { return contract.Stored(status) }
