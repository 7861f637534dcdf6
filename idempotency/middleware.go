package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// ErrHandlerPanicked is the Err of the OutcomeReleased event of a request
// whose handler panicked. The Middleware released the claim and let the
// panic continue.
var ErrHandlerPanicked = errors.New("idempotency: handler panicked")

// errRequestTooLarge is returned by readBody for a body over the limit.
var errRequestTooLarge = errors.New("idempotency: request body too large")

// storeRetryAfter is the Retry-After, in seconds, of a 503 answer.
const storeRetryAfter = 1

// Middleware returns a middleware that makes the protected methods of the
// handler it wraps idempotent under the Idempotency-Key header, with store as
// the shared record of claims and outcomes. See the package documentation
// for the rules it implements. When store also implements TxStore, the
// Middleware runs in transactional mode.
//
// The returned middleware and the handlers it makes are safe for concurrent
// use. Middleware panics if store is nil.
func Middleware(store Store, opts ...Option) func(http.Handler) http.Handler {
	if store == nil {
		panic("idempotency: Middleware needs a non-nil Store")
	}
	cfg := newConfig(opts)
	txs, _ := store.(TxStore)
	wr, _ := store.(Watcher)
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("idempotency: Middleware needs a non-nil http.Handler")
		}
		return &middleware{store: store, txStore: txs, watcher: wr, cfg: cfg, next: next}
	}
}

type middleware struct {
	store   Store
	txStore TxStore // non-nil in transactional mode
	watcher Watcher // non-nil when the store can notify waiters
	cfg     *config
	next    http.Handler
	waiters atomic.Int64 // requests waiting under WithWaitForResult
}

var _ http.Handler = (*middleware)(nil)

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.cfg.methods[r.Method] {
		m.next.ServeHTTP(w, r)
		return
	}
	values := r.Header[HeaderIdempotencyKey]
	if len(values) == 0 {
		if !m.cfg.keyRequired {
			m.next.ServeHTTP(w, r)
			return
		}
		m.emit(Event{Outcome: OutcomeMissingKey, Status: http.StatusBadRequest})
		writeProblem(w, problem{Type: ProblemMissingKey, Status: http.StatusBadRequest,
			Detail: "This request must carry an Idempotency-Key header."}, 0)
		return
	}
	key, err := ParseKey(values)
	if err != nil {
		detail := "The Idempotency-Key header is malformed."
		var ke *KeyError
		if errors.As(err, &ke) {
			detail = "The Idempotency-Key header is malformed: " + ke.Reason + "."
		}
		m.emit(Event{Outcome: OutcomeMalformedKey, Status: http.StatusBadRequest, Err: err})
		writeProblem(w, problem{Type: ProblemMalformedKey, Status: http.StatusBadRequest, Detail: detail}, 0)
		return
	}
	f := &flight{}
	body, err := m.readBody(r, f)
	if err != nil {
		limit := m.cfg.maxRequestBody
		var mbe *http.MaxBytesError // an outer http.MaxBytesReader's limit
		if errors.As(err, &mbe) {
			limit, err = mbe.Limit, errRequestTooLarge
		}
		if errors.Is(err, errRequestTooLarge) {
			m.emit(Event{Outcome: OutcomeTooLarge, Key: Key{Key: key}, Status: http.StatusRequestEntityTooLarge})
			writeProblem(w, problem{Type: ProblemRequestTooLarge, Status: http.StatusRequestEntityTooLarge,
				Detail: "The request body is larger than " + strconv.FormatInt(limit, 10) + " bytes.",
				Key:    key}, 0)
			return
		}
		m.emit(Event{Outcome: OutcomeBadRequest, Key: Key{Key: key}, Status: http.StatusBadRequest, Err: err})
		writeProblem(w, problem{Type: ProblemBodyUnreadable, Status: http.StatusBadRequest, Key: key}, 0)
		return
	}
	var scope string
	if m.cfg.scope != nil {
		if scope, err = m.cfg.scope(r); err != nil {
			m.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: scope function failed",
				slog.String("key", key), slog.Any("error", err))
			m.emit(Event{Outcome: OutcomeScopeError, Key: Key{Key: key}, Status: http.StatusInternalServerError, Err: err})
			writeProblem(w, problem{Type: ProblemScopeUnavailable, Status: http.StatusInternalServerError, Key: key}, 0)
			return
		}
	}
	k := Key{Scope: scope, Key: key}
	fp := Fingerprint(r, body)
	if m.txStore != nil {
		m.serveTx(w, r, f, k, fp)
		return
	}
	m.serve(w, r, f, k, fp)
}

// flight is the state of one protected request, allocated once for it.
type flight struct {
	body  restoredBody
	rec   recorder
	lease leaseKeeper
	claim claimCtx
}

// restoredBody replays the bytes read from a request body to the handler.
type restoredBody struct{ bytes.Reader }

func (*restoredBody) Close() error { return nil }

// readBody reads the whole body, up to the limit, and puts it back on r so
// that the handler reads the same bytes.
func (m *middleware) readBody(r *http.Request, f *flight) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := m.cfg.maxRequestBody
	if r.ContentLength > limit {
		return nil, errRequestTooLarge
	}
	size := 512
	if r.ContentLength >= 0 {
		size = int(r.ContentLength) + 1 // +1 to see EOF without growing
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errRequestTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	f.body.Reset(buf)
	r.Body = &f.body
	return buf, nil
}

// serve runs the protected request against a plain Store: claim, then run
// the handler under a renewed lease, or answer from the entry in the way.
func (m *middleware) serve(w http.ResponseWriter, r *http.Request, f *flight, k Key, fp string) {
	var wt waiter
	defer wt.done(m)
	for {
		sent := time.Now()
		// The claim is kept for at least one lease whatever the TTL: an entry
		// that expired before its first renewal would let a duplicate run
		// beside a handler slower than a short TTL.
		res, err := m.store.Claim(r.Context(), k, fp, m.cfg.lease, max(m.cfg.ttl, m.cfg.lease))
		if err != nil {
			m.storeFailed(w, r, k, err)
			return
		}
		if res.Acquired {
			m.run(w, r, f, k, res, sent)
			return
		}
		if !m.refused(w, r, k, fp, res.Entry, &wt) {
			return
		}
	}
}

// run runs the handler under the claim res, sent at sent, then stores its
// outcome and sends its response.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, f *flight, k Key, res ClaimResult, sent time.Time) {
	token := res.Token
	// The lease lasts at least until sent plus what the store said was left
	// when it answered, whenever in the round trip that was.
	left := res.LeaseRemaining
	if left == 0 || left > m.cfg.lease {
		left = m.cfg.lease
	}
	expires := sent.Add(left)
	if remaining := time.Until(expires); remaining < m.cfg.lease/2 {
		// The first renewal might not reach the store before the lease
		// lapses, and another instance could then run the handler beside
		// this one.
		m.claimTooLate(w, r, k, token, remaining)
		return
	}
	detached := context.WithoutCancel(r.Context())
	if res.TookOver {
		m.cfg.logger.LogAttrs(r.Context(), slog.LevelInfo, "idempotency: took over a claim whose lease lapsed",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Int64("token", token))
	}
	rec := &f.rec
	*rec = recorder{w: w, limit: m.cfg.maxResponse, canStream: true}
	hctx, cancelHandler := context.WithCancelCause(r.Context())
	defer cancelHandler(nil)
	lk := &f.lease
	lk.start(m, detached, k, token, sent, expires, cancelHandler)
	defer lk.stop()
	ev := Event{Key: k, Token: token, TookOver: res.TookOver}
	// ctx bounds the store calls after the handler: lk cancels it after
	// storeTimeout.
	ctx, cancel := context.WithCancel(detached)
	defer cancel()
	finished := false
	defer func() {
		if finished {
			return
		}
		// The handler panicked. Release the claim so that a retry runs it
		// again; the panic goes on once this returns.
		if lk.settle(m.cfg.storeTimeout, cancel) {
			return
		}
		ev.Outcome, ev.Err = OutcomeReleased, ErrHandlerPanicked
		m.release(ctx, ev)
	}()
	f.claim = claimCtx{Context: hctx, key: k, token: token}
	m.next.ServeHTTP(rec, r.WithContext(&f.claim))
	finished = true
	lost := lk.settle(m.cfg.storeTimeout, cancel)
	ev.Status = rec.statusCode()
	if !lost {
		if storable(ev.Status) {
			m.complete(ctx, ev, m.outcome(rec))
		} else {
			ev.Outcome = OutcomeReleased
			if cause := context.Cause(hctx); errors.Is(cause, ErrLeaseLost) {
				ev.Err = cause
			}
			m.release(ctx, ev)
		}
	}
	lk.stop()
	rec.flush()
}

// claimTooLate answers a request whose claim came back with less than half
// its lease left (left), so the handler is not started: as for a key in
// progress, since it is held until the lease lapses.
func (m *middleware) claimTooLate(w http.ResponseWriter, r *http.Request, k Key, token int64, left time.Duration) {
	m.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: claim acquired too late to start the handler; answering 409",
		slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Int64("token", token),
		slog.Duration("lease_left", left), slog.Duration("lease", m.cfg.lease))
	m.emit(Event{Outcome: OutcomeInProgress, Key: k, Token: token, Status: http.StatusConflict, Err: errClaimTooLate})
	writeProblem(w, problem{Type: ProblemInProgress, Status: http.StatusConflict, Key: k.Key,
		Detail: "A request with this Idempotency-Key is being processed. Retry later with the same key."}, retryAfterSeconds(left))
}

func (m *middleware) afterRunFailed(ctx context.Context, ev Event, msg string, err error) {
	m.cfg.logger.LogAttrs(ctx, slog.LevelError, msg,
		slog.String("scope", ev.Key.Scope), slog.String("key", ev.Key.Key),
		slog.Int64("token", ev.Token), slog.Int("status", ev.Status), slog.Any("error", err))
	ev.Outcome, ev.Err = OutcomeStoreError, err
	m.emit(ev)
}

func (m *middleware) leaseLost(ctx context.Context, k Key, token int64, status int, err error) {
	m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: lease lost; another request took the key over and this outcome is not stored",
		slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Int64("token", token), slog.Any("error", err))
	m.emit(Event{Outcome: OutcomeLeaseLost, Key: k, Token: token, Status: status, Err: fmt.Errorf("%w: %w", ErrLeaseLost, err)})
}

// outcome is the Response to store for what rec recorded.
func (m *middleware) outcome(rec *recorder) Response {
	if rec.oversize {
		return Response{Status: rec.statusCode(), Oversize: true}
	}
	return Response{Status: rec.statusCode(), Header: m.cfg.storedHeaders(rec.w.Header()), Body: rec.buf}
}

// storable reports whether an outcome with this status is stored. Server
// errors and the two "try again" client errors are not: a retry must run.
func storable(status int) bool {
	return status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// refused answers a request whose claim was refused because of entry e, or
// waits for e to settle; it reports true when the caller should claim again.
func (m *middleware) refused(w http.ResponseWriter, r *http.Request, k Key, fp string, e Entry, wt *waiter) bool {
	if e.Fingerprint != fp {
		m.emit(Event{Outcome: OutcomeMismatch, Key: k, Status: http.StatusUnprocessableEntity})
		writeProblem(w, problem{Type: ProblemKeyReused, Status: http.StatusUnprocessableEntity, Key: k.Key,
			Detail: "This Idempotency-Key was used for a request with a different method, path, query or body."}, 0)
		return false
	}
	switch e.State {
	case StateCompleted:
		m.replay(w, r, k, e)
		return false
	case StateInProgress:
	default:
		m.storeUnavailable(w, r, k, errors.New("idempotency: store returned an entry in an unknown state"))
		return false
	}
	if m.cfg.wait > 0 && wt.pause(r.Context(), m, k, e) {
		return true
	}
	m.emit(Event{Outcome: OutcomeInProgress, Key: k, Token: e.Token, Status: http.StatusConflict})
	writeProblem(w, problem{Type: ProblemInProgress, Status: http.StatusConflict, Key: k.Key,
		Detail: "A request with this Idempotency-Key is still being processed. Retry later with the same key."}, retryAfterSeconds(e.LeaseRemaining))
	return false
}

// retryAfterSeconds is the Retry-After, in whole seconds rounded up, of a
// 409 for a key held for d more: at least 1.
func retryAfterSeconds(d time.Duration) int {
	if d <= time.Second {
		return 1
	}
	return int((d + time.Second - 1) / time.Second)
}

// replay answers with the stored outcome of e.
func (m *middleware) replay(w http.ResponseWriter, r *http.Request, k Key, e Entry) {
	resp := e.Response
	if resp == nil {
		m.storeUnavailable(w, r, k, errors.New("idempotency: store returned a completed entry without a response"))
		return
	}
	h := w.Header()
	h.Set(HeaderReplayed, "true")
	if resp.Oversize {
		m.emit(Event{Outcome: OutcomeOversize, Key: k, Token: e.Token, Status: http.StatusGone})
		writeProblem(w, problem{Type: ProblemResponseTooLarge, Status: http.StatusGone, Key: k.Key,
			OriginalStatus: resp.Status,
			Detail:         "The operation with this Idempotency-Key completed, but its response was too large to keep. It will not run again."}, 0)
		return
	}
	for name, v := range resp.Header {
		if m.cfg.replayHeaders[name] {
			h[name] = v[:len(v):len(v)] // a later Add must not write into the store's slice
		}
	}
	m.emit(Event{Outcome: OutcomeReplay, Key: k, Token: e.Token, Status: resp.Status})
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = w.Write(resp.Body)
	}
}

// storeFailed handles a store failure before the handler ran: 503, or, with
// WithFailOpen, the handler runs unprotected. A failure because the request's
// own context ended is no outage: the client left, and running the handler
// unprotected for nobody would only risk a duplicate of its retry.
func (m *middleware) storeFailed(w http.ResponseWriter, r *http.Request, k Key, err error) {
	if !m.cfg.failOpen || r.Context().Err() != nil {
		m.storeUnavailable(w, r, k, err)
		return
	}
	m.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: store failed; running the handler unprotected (fail open)",
		slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
	m.emit(Event{Outcome: OutcomeStoreError, Key: k, Err: err})
	m.next.ServeHTTP(w, r)
}

// storeUnavailable answers 503 without running the handler.
func (m *middleware) storeUnavailable(w http.ResponseWriter, r *http.Request, k Key, err error) {
	level := slog.LevelError
	if r.Context().Err() != nil {
		level = slog.LevelDebug // the client left; the store call was cut short
	}
	m.cfg.logger.LogAttrs(r.Context(), level, "idempotency: store failed; answering 503",
		slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
	m.emit(Event{Outcome: OutcomeStoreError, Key: k, Status: http.StatusServiceUnavailable, Err: err})
	writeProblem(w, problem{Type: ProblemStoreUnavailable, Status: http.StatusServiceUnavailable, Key: k.Key,
		Detail: "The idempotency store is unavailable, so the request was not processed. Retry with the same key."}, storeRetryAfter)
}

func (m *middleware) emit(ev Event) {
	if m.cfg.hook != nil {
		m.cfg.hook(ev)
	}
}
