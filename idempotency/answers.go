package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// storeRetryAfter is the Retry-After, in seconds, of a 503 answer.
const storeRetryAfter = 1

// refused answers a request whose claim was refused because of entry e, or
// waits for e to settle; it reports true when the request should claim
// again.
func (q *request) refused(e Entry) bool {
	m, k := q.m, q.claim.key
	if e.Fingerprint != q.fp {
		// Used by another request, also when the request had found it
		// held by its own on an earlier look, before it waited.
		q.repeat = false
		q.answer(Event{Outcome: OutcomeMismatch, Key: k, Status: http.StatusUnprocessableEntity}, func() {
			writeProblem(q.writer(), problem{Type: ProblemKeyReused, Status: http.StatusUnprocessableEntity, Key: k.Key,
				Detail: "This Idempotency-Key was used for a request with a different method, path, query, media type or body."}, 0)
		})
		return false
	}
	q.repeat = true
	switch e.State {
	case StateCompleted:
		q.replay(e)
		return false
	case StateInProgress:
	default:
		q.storeUnavailable(errors.New("idempotency: store returned an entry in an unknown state"))
		return false
	}
	if m.cfg.wait > 0 && q.pause(e) {
		return true
	}
	q.answer(Event{Outcome: OutcomeInProgress, Key: k, Token: e.Token, Status: http.StatusConflict}, func() {
		writeProblem(q.writer(), problem{Type: ProblemInProgress, Status: http.StatusConflict, Key: k.Key,
			Detail: "A request with this Idempotency-Key is still being processed. Retry later with the same key."}, inProgressRetryAfter(m.runs.estimate(q.r), e.LeaseRemaining))
	})
	return false
}

// retryAfterSeconds is the Retry-After, in whole seconds rounded up, of a
// 409 for a key held for d more: at least 1.
func retryAfterSeconds(d time.Duration) int {
	if d <= time.Second {
		return 1
	}
	return int(clock.CeilUnits(d, time.Second))
}

// replay answers with the stored outcome of e. The answer's headers are
// set once the event was given (see request.answer), so that a writer that
// panics as they are set leaves the request its one event.
func (q *request) replay(e Entry) {
	k := q.claim.key
	resp := e.Response
	if resp == nil {
		q.storeUnavailable(errors.New("idempotency: store returned a completed entry without a response"))
		return
	}
	if resp.Oversize {
		q.answer(Event{Outcome: OutcomeOversize, Key: k, Token: e.Token, Status: http.StatusGone}, func() {
			q.writer().Header()[HeaderReplayed] = []string{"true"} // the name is canonical: no Set needed
			writeProblem(q.writer(), problem{Type: ProblemResponseTooLarge, Status: http.StatusGone, Key: k.Key,
				OriginalStatus: resp.Status,
				Detail:         "The operation with this Idempotency-Key completed, but its response could not be kept (too large, or not sent whole). It will not run again."}, 0)
		})
		return
	}
	q.answer(Event{Outcome: OutcomeReplay, Key: k, Token: e.Token, Status: resp.Status}, func() { q.writeReplay(resp) })
}

// writeReplay writes resp, a stored outcome that is replayable.
func (q *request) writeReplay(resp *Response) {
	// The stored values may be shared with other replays (see Store.Claim):
	// the writer gets copies, which it may change at will, in one array
	// when every name has one value (sized without a pass over the map to
	// count them, whose start costs as much as the copying pass); a name
	// with more may grow it into a second, the slices already set keeping
	// the first.
	values := make([]string, 1, len(resp.Header)+2) // and Idempotent-Replayed, Content-Length
	values[0] = "true"
	h := q.writer().Header()
	h[HeaderReplayed] = values[:1:1] // the name is canonical: no Set needed
	for name, v := range resp.Header {
		// Whether the body is encoded decides only for the coding's own
		// names, so it is looked up (stored names are canonical, see
		// storedHeaders) for those alone.
		if q.m.cfg.keeps(name, codingHeader(name) && len(resp.Header["Content-Encoding"]) > 0) {
			i := len(values)
			values = append(values, v...)
			h[name] = values[i:len(values):len(values)] // a later Add must not write into the next name's values
		}
	}
	var length []string
	if q.r.Method == http.MethodHead {
		length = resp.Header["Content-Length"]
	}
	if len(length) == 1 {
		// The length the handler declared for HEAD (see middleware.outcome).
		i := len(values)
		values = append(values, length[0])
		h["Content-Length"] = values[i:len(values):len(values)]
	} else if len(resp.Body) > 0 {
		// net/http's writer adds a Content-Length by itself only to a body
		// that fits its few-KiB buffer, and sends a larger one chunked; the
		// body is known whole, so every replay says how long it is, as the
		// first answer did when its handler set it.
		i := len(values)
		values = append(values, strconv.Itoa(len(resp.Body)))
		h["Content-Length"] = values[i:len(values):len(values)]
	}
	q.writer().WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = q.writer().Write(resp.Body)
	}
}

// superseded answers, in place of the storable response of a handler whose
// claim was taken over while it ran, 409 in progress: the outcome recorded
// for the key is the newer holder's, so this client, like every repeat,
// gets only that one (by retrying with the same key). The handler's
// headers are dropped (see answerInPlace).
func (q *request) superseded() {
	q.answered = true
	q.answerInPlace()
	writeProblem(q.writer(), problem{Type: ProblemInProgress, Status: http.StatusConflict, Key: q.claim.key.Key,
		Detail: "Another request took this Idempotency-Key over while this one ran. Retry with the same key for the recorded outcome."}, 1)
}

// abandonedRun answers, in place of a handler that returned without
// writing anything after its context ended, 503 with Retry-After, when the
// mode takes that for a run that stopped (abandoned; see the callers in
// leasemode.go and txmode.go): nothing of it is
// recorded, where net/http's implicit 200 would be stored and replayed to
// every retry as a success that never happened. It writes into the
// recorder, before the mode settles the claim, which a 503 releases (or
// rolls back), and drops the handler's headers, as superseded does.
func (q *request) abandonedRun(ctx context.Context, abandoned bool) {
	if q.rec.status != 0 || !abandoned {
		return
	}
	q.answerInPlace()
	writeProblem(&q.rec, problem{Type: ProblemStoreUnavailable, Status: http.StatusServiceUnavailable, Key: q.claim.key.Key,
		Detail: "The request was cancelled before the handler answered (" + context.Cause(ctx).Error() +
			"), so nothing was recorded. Retry with the same key."}, storeRetryAfter)
}

// answerInPlace readies the response headers for an answer given in the
// place of the handler's, by the Middleware or, after a panic, by whatever
// recovers it (see request.run): those set before the
// handler ran stay as they were, and none of the handler's own (a cookie,
// a Location, a body's length) goes with an answer that is not its. The
// former come from a copy of their own (request.outer), values included:
// a handler may write into a value slice of the map in place.
func (q *request) answerInPlace() {
	h := q.writer().Header()
	clear(h)
	maps.Copy(h, q.outer)
}

// claimTooLate answers a request whose claim came back with less than half
// its lease left (left), so the handler is not started: as for a key in
// progress, since it is held until the lease lapses.
func (q *request) claimTooLate(token int64, left time.Duration) {
	m, k := q.m, q.claim.key
	m.emitAfterLog(q.eventOf(Event{Outcome: OutcomeInProgress, Key: k, Token: token, Status: http.StatusConflict, Err: errClaimTooLate}), 0, nil, func() {
		m.cfg.logger.LogAttrs(q.r.Context(), slog.LevelWarn, "idempotency: claim acquired too late to start the handler; answering 409",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Int64("token", token),
			slog.Duration("lease_left", left), slog.Duration("lease", m.cfg.lease))
	}, func() {
		writeProblem(q.writer(), problem{Type: ProblemInProgress, Status: http.StatusConflict, Key: k.Key,
			Detail: "A request with this Idempotency-Key is being processed. Retry later with the same key."}, retryAfterSeconds(left))
	})
}

// storeFailed handles a store failure before the handler ran: 503, or, with
// WithFailOpen, the handler runs unprotected. A failure because the request's
// own context ended is no outage: the client left, and running the handler
// unprotected for nobody would only risk a duplicate of its retry.
func (q *request) storeFailed(err error) {
	m, r, k := q.m, q.r, q.claim.key
	if !m.cfg.failOpen || r.Context().Err() != nil {
		q.storeUnavailable(err)
		return
	}
	m.emitAfterLog(q.eventOf(Event{Outcome: OutcomeStoreError, Key: k, Err: err}), 0, nil, func() {
		m.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: store failed; running the handler unprotected (fail open)",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
	}, nil)
	m.next.ServeHTTP(q.writer(), r)
}

// storeUnavailable answers 503 without running the handler.
func (q *request) storeUnavailable(err error) {
	m, r, k := q.m, q.r, q.claim.key
	level := slog.LevelError
	if r.Context().Err() != nil {
		level = slog.LevelDebug // the client left; the store call was cut short
	}
	m.emitAfterLog(q.eventOf(Event{Outcome: OutcomeStoreError, Key: k, Status: http.StatusServiceUnavailable, Err: err}), 0, nil, func() {
		m.cfg.logger.LogAttrs(r.Context(), level, "idempotency: store failed; answering 503",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
	}, func() {
		writeProblem(q.writer(), problem{Type: ProblemStoreUnavailable, Status: http.StatusServiceUnavailable, Key: k.Key,
			Detail: "The idempotency store is unavailable, so the request was not processed. Retry with the same key."}, storeRetryAfter)
	})
}

// afterRunFailed reports a store failure after the handler ran: the
// response is still sent. It sets s.reported once it is logged: should the
// logger panic, the caller reports the failure (see
// request.settlePanicked), with the status sent by then.
func (m *middleware) afterRunFailed(ctx context.Context, ev Event, msg string, err error, s *settling) {
	s.failed = err
	m.cfg.logger.LogAttrs(ctx, slog.LevelError, msg,
		slog.String("scope", ev.Key.Scope), slog.String("key", ev.Key.Key),
		slog.Int64("token", ev.Token), slog.Int("status", ev.Status), slog.Any("error", err))
	s.reported = true
	ev.Outcome, ev.Err = OutcomeStoreError, err
	s.emit(m, ev)
}

// leaseLost reports a claim found taken over: its outcome is not stored.
// ev is the request's event (see request.event), status what send sends
// (or, with a nil send, what was sent, when the response streamed; see
// middleware.answer). Should the logger panic, the answer is not sent, and
// ev carries the status sent before it (see emitAfterLog). s is the
// settling of a handler's panic (see leaseClaim.abort), nil otherwise.
func (q *request) leaseLost(ctx context.Context, ev Event, status int, err error, s *settling, send func()) {
	m := q.m
	ev.Outcome, ev.Status, ev.Err = OutcomeLeaseLost, status, fmt.Errorf("%w: %w", ErrLeaseLost, err)
	m.emitAfterLog(ev, q.sentStatus(), s, func() {
		m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: lease lost; another request took the key over and this outcome is not stored",
			slog.String("scope", ev.Key.Scope), slog.String("key", ev.Key.Key), slog.Int64("token", ev.Token), slog.Any("error", err))
	}, send)
}
