package idempotency

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrHandlerPanicked is the Err of the OutcomeReleased event of a request
// whose handler panicked (OutcomeDeclined when it held no claim, see
// ErrClaimDeclined). The Middleware released the claim and let the panic
// continue.
var ErrHandlerPanicked = errors.New("idempotency: handler panicked")

// errRequestTooLarge is returned by readBody for a body over the limit.
var errRequestTooLarge = errors.New("idempotency: request body too large")

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
	wr, _ := store.(Watcher)
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("idempotency: Middleware needs a non-nil http.Handler")
		}
		m := &middleware{store: store, watcher: wr, cfg: cfg, next: next}
		epoch := cfg.clock.Now()
		for i := range m.keepers {
			m.keepers[i].clk, m.keepers[i].epoch = cfg.clock, epoch
		}
		if txs, ok := store.(TxStore); ok {
			m.mode = txMode{m: m, store: txs}
		} else {
			m.mode = leaseMode{m: m}
		}
		return m
	}
}

// middleware is the handler Middleware makes.
type middleware struct {
	store   Store
	mode    mode    // lease mode, or transactional mode over a TxStore
	watcher Watcher // non-nil when the store can notify waiters
	cfg     *config
	next    http.Handler
	waiters atomic.Int64 // requests waiting under WithWaitForResult
	runs    runTimes     // how long the handler runs, per route
	keepers [keeperShards]keeperQueue
	// keeperPanics holds, per *leaseKeeper, the *keeperPanic it recovered
	// on its timer until its request takes it: a rare thing, kept out of
	// the keeper so that it costs the others no byte.
	keeperPanics sync.Map
	// epoch is the first reading of the clock at an admission that was
	// not the zero time, from which requests count theirs (see since).
	epoch atomic.Pointer[time.Time]
}

var _ http.Handler = (*middleware)(nil)

// ServeHTTP admits a protected request (method, key, body, scope) and
// serves it under its claim; anything else passes through.
func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.cfg.protects(r.Method) {
		m.next.ServeHTTP(w, r)
		return
	}
	values := r.Header[HeaderIdempotencyKey]
	if len(values) == 0 {
		if !m.cfg.keyRequired {
			m.next.ServeHTTP(w, r)
			return
		}
		m.answer(admissionEvent(r, Event{Outcome: OutcomeMissingKey, Status: http.StatusBadRequest}), nil, func() {
			writeProblem(w, problem{Type: ProblemMissingKey, Status: http.StatusBadRequest,
				Detail: "This request must carry an Idempotency-Key header."}, 0)
		})
		return
	}
	key, err := keyFromFields(values)
	if err != nil {
		m.malformedKey(w, r, err)
		return
	}
	q := &request{m: m, r: r, rec: recorder{w: w}}
	if len(m.cfg.hooks) > 0 {
		q.began, q.timed = m.since(m.cfg.clock.Now())
	}
	if q.admit(key) {
		q.serve()
	}
}

// Steps of admission, for the event of one that panics (see admitPanicked).
const (
	admitBody  = iota // reading the body, or fingerprinting what it holds
	admitScope        // the scope function
	admitDone         // admitted, or answered
)

// admit reads q's body, names the scope of its key and fingerprints it,
// or answers a body or scope that fails; it reports whether q is to be
// served. Should one of them panic (a body's Read, the scope function, a
// file of a parsed form), the request gives its one event first (see
// admitPanicked), and the panic goes on.
func (q *request) admit(key string) bool {
	m, r := q.m, q.r
	step := admitBody
	defer func() {
		if step != admitDone {
			q.admitPanicked(key, step)
		}
	}()
	body, room, err := q.readBody()
	if err != nil {
		step = admitDone
		m.unreadableBody(q.writer(), r, key, err)
		return false
	}
	var scope string
	if m.cfg.scope != nil {
		step = admitScope
		scope, err = m.cfg.scope(r)
		if err != nil {
			step = admitDone
			m.emitAfterLog(admissionEvent(r, Event{Outcome: OutcomeScopeError, Key: Key{Key: key}, Status: http.StatusInternalServerError, Err: err}), 0, nil, func() {
				m.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: scope function failed",
					slog.String("key", key), slog.Any("error", err))
			}, func() {
				// The scope function's error stays in the log: it may say
				// more about the server than a client is to know.
				writeProblem(q.writer(), problem{Type: ProblemScopeUnavailable, Status: http.StatusInternalServerError, Key: key,
					Detail: "The owner of the Idempotency-Key could not be determined, so the request was not run. Retry with the same key."}, 0)
			})
			return false
		}
		step = admitBody
	}
	q.claim.key = Key{Scope: scope, Key: key}
	q.fp = fingerprintIn(r, body, room)
	step = admitDone
	return true
}

// Errs of the events of an admission that panicked (see admitPanicked).
var (
	errBodyPanicked  = errors.New("idempotency: reading the request body panicked")
	errScopePanicked = errors.New("idempotency: the scope function panicked")
)

// admitPanicked gives the one event of a request whose admission panicked
// at step, before any store call, labelled as a failure of that step is
// (OutcomeBadRequest for the body, OutcomeScopeError for the scope
// function), with no status: nothing was sent. A hook's panic does not
// replace the one in flight (see middleware.emitUnwinding).
func (q *request) admitPanicked(key string, step int) {
	ev := Event{Outcome: OutcomeBadRequest, Key: Key{Key: key}, Err: errBodyPanicked}
	if step == admitScope {
		ev.Outcome, ev.Err = OutcomeScopeError, errScopePanicked
	}
	q.m.emitUnwinding(admissionEvent(q.r, ev))
}

// malformedKey answers a key that does not parse.
func (m *middleware) malformedKey(w http.ResponseWriter, r *http.Request, err error) {
	detail := "The Idempotency-Key header is malformed."
	var ke *KeyError
	if errors.As(err, &ke) {
		detail = "The Idempotency-Key header is malformed: " + ke.Reason + "."
	}
	m.answer(admissionEvent(r, Event{Outcome: OutcomeMalformedKey, Status: http.StatusBadRequest, Err: err}), nil, func() {
		writeProblem(w, problem{Type: ProblemMalformedKey, Status: http.StatusBadRequest, Detail: detail}, 0)
	})
}

// unreadableBody answers a body over the limit (413), one that did not
// arrive before the server's read deadline (408), or one that could not be
// read (400).
func (m *middleware) unreadableBody(w http.ResponseWriter, r *http.Request, key string, err error) {
	limit := m.cfg.maxRequestBody
	var mbe *http.MaxBytesError // an outer http.MaxBytesReader's limit
	if errors.As(err, &mbe) {
		limit, err = mbe.Limit, errRequestTooLarge
	}
	if errors.Is(err, errRequestTooLarge) {
		m.answer(admissionEvent(r, Event{Outcome: OutcomeTooLarge, Key: Key{Key: key}, Status: http.StatusRequestEntityTooLarge}), nil, func() {
			writeProblem(w, problem{Type: ProblemRequestTooLarge, Status: http.StatusRequestEntityTooLarge,
				Detail: "The request body is larger than " + strconv.FormatInt(limit, 10) + " bytes.",
				Key:    key}, 0)
		})
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The server's read deadline passed while the body was on its way:
		// the request may be valid, the server only stopped waiting, so the
		// answer is one the client retries (408), not a final 400.
		m.answer(admissionEvent(r, Event{Outcome: OutcomeBadRequest, Key: Key{Key: key}, Status: http.StatusRequestTimeout, Err: err}), nil, func() {
			writeProblem(w, problem{Type: ProblemRequestTimeout, Status: http.StatusRequestTimeout, Key: key,
				Detail: "The request body did not arrive before the server's read deadline. Retry with the same key and body."}, 0)
		})
		return
	}
	m.answer(admissionEvent(r, Event{Outcome: OutcomeBadRequest, Key: Key{Key: key}, Status: http.StatusBadRequest, Err: err}), nil, func() {
		writeProblem(w, problem{Type: ProblemBodyUnreadable, Status: http.StatusBadRequest, Key: key,
			Detail: "The request body could not be read (" + err.Error() + "). Nothing was run."}, 0)
	})
}

// firstRead is the most readBody reserves before a body's bytes arrive:
// DefaultMaxRequestBody, so that under the default limit a body of known
// length is read into one buffer of its size.
const firstRead = DefaultMaxRequestBody

// sharedBodyMax is the largest allocation of a body whose buffer also has
// room for the request's fingerprint (see readBody): what a store that
// keeps the fingerprint string keeps alive with it.
const sharedBodyMax = 256

// readBody reads the whole body, up to the limit, and puts it back on the
// request so that the handler reads the same bytes. A short body of
// announced length is read into a buffer with room after it for the
// fingerprint's text (see fingerprint), which it returns as room, empty
// when there is none: the two take one allocation.
func (q *request) readBody() (body, room []byte, err error) {
	r := q.r
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil, nil
	}
	limit := q.m.cfg.maxRequestBody
	if r.ContentLength > limit {
		return nil, nil, errRequestTooLarge
	}
	// The buffer follows the bytes that arrive, not only the length the
	// client announced: a Content-Length far above firstRead with a body
	// that never comes reserves firstRead.
	size := 512
	if r.ContentLength >= 0 {
		size = int(min(r.ContentLength, firstRead)) + 1 // +1 to see EOF without growing
		if size+fingerprintLen <= sharedBodyMax {
			size += fingerprintLen
		}
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = growBody(buf, r.ContentLength, limit)
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, nil, errRequestTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	// Room in a larger buffer (one of unknown length, or grown past the
	// length announced) would keep it alive as long as a store keeps the
	// fingerprint.
	if cap(buf) <= sharedBodyMax && cap(buf)-len(buf) >= fingerprintLen {
		room = buf[len(buf):len(buf)]
	}
	body = buf[:len(buf):len(buf)] // nothing appends to it over room
	q.body.Reset(body)
	r.Body = &q.body
	return body, room, nil
}

// growBody returns full buf with room for more: twice its capacity, but
// no more than the announced length (announced, -1 when unknown) or the
// limit, plus one byte to see EOF or the excess, while buf is below them.
func growBody(buf []byte, announced, limit int64) []byte {
	c := int64(cap(buf))
	next := 2 * c
	if announced >= c && announced < next {
		next = announced + 1
	}
	if limit >= c && limit < next {
		next = limit + 1
	}
	grown := make([]byte, len(buf), next)
	copy(grown, buf)
	return grown
}

// since returns the time from the epoch to now, an admission's reading of
// the clock, and whether it is one: a reading of the zero time is none (a
// fake clock not yet set), as is one further from the epoch than a
// Duration counts (292 years, which only a fake clock set meanwhile can
// be). The first reading that is not the zero time becomes the epoch.
func (m *middleware) since(now time.Time) (time.Duration, bool) {
	if now.IsZero() {
		return 0, false
	}
	e := m.epoch.Load()
	if e == nil {
		first := now // escapes on this path only
		m.epoch.CompareAndSwap(nil, &first)
		e = m.epoch.Load()
	}
	d := now.Sub(*e)
	return d, d != math.MaxInt64 && d != math.MinInt64
}

// emit hands ev to every hook, in the order they were given, with its
// Duration. An event of a request comes from [request.eventOf] or
// [request.event], an event of admission from [admissionEvent].
func (m *middleware) emit(ev Event) {
	if len(m.cfg.hooks) == 0 {
		return
	}
	if !ev.began.IsZero() {
		ev.Duration = m.cfg.clock.Now().Sub(ev.began)
	}
	m.cfg.hooks.Call(&ev)
}

// answer gives ev, then writes the answer ev describes with write. Should
// a hook panic on ev (or call runtime.Goexit), write writes it all the
// same before that panic goes on, so that the status the hooks had, the
// hooks after the panicking one included, is the status sent, as with a
// handler that panics after its response went out; a panic of write's own
// meanwhile is dropped (see unwinding). A nil write writes nothing: the
// answer, if any, is not the Middleware's to write (Status 0). ev is given
// as s says (see settling.emit); s is nil outside the recording of an
// outcome.
func (m *middleware) answer(ev Event, s *settling, write func()) {
	given := false
	defer func() {
		if !given && write != nil {
			m.unwinding(ev.Context(), ev.Key, write)
		}
	}()
	s.emit(m, ev)
	given = true
	if write != nil {
		write()
	}
}

// emitAfterLog answers with write as ev says (see answer) once log, a call
// of the Middleware's logger made before ev is given, returned. Should the
// logger panic, ev is given before the panic goes on, with the status sent
// by then (sent: 0 when nothing was, since the answer ev describes never
// is), so that the request still gives its one event, as after a
// handler's panic; a hook's panic then does not replace the logger's (see
// emitUnwinding).
func (m *middleware) emitAfterLog(ev Event, sent int, s *settling, log, write func()) {
	logged := false
	defer func() {
		if !logged {
			ev.Status = sent
			m.emitUnwinding(ev)
		}
	}()
	log()
	logged = true
	m.answer(ev, s, write)
}

// emitUnwinding gives ev (see emit) while a panic goes on (or a
// runtime.Goexit), one that the hooks did not raise: a hook's panic is
// dropped (see unwinding), after every hook had ev.
func (m *middleware) emitUnwinding(ev Event) {
	m.unwinding(ev.Context(), ev.Key, func() { m.emit(ev) })
}

// unwinding runs cleanup, for the request with key k, while a panic goes
// on (or a runtime.Goexit), one that cleanup did not raise, or where a
// panic of cleanup's would leave the request with no event (the end of a
// wait before its handler runs, see request.claimAndServe): a panic of
// cleanup's own is recovered and dropped, so that the first panic, which
// tells what broke, reaches whatever recovers the request's panics as it
// was; the later one is a consequence of it. The dropped panic is logged
// (see logDropped), since nothing else will show it. It reports whether
// cleanup panicked. The recover is in a call of its own, which the first
// panic does not unwind, so it never stops that one.
func (m *middleware) unwinding(ctx context.Context, k Key, cleanup func()) (panicked bool) {
	panicked = true
	defer func() {
		if panicked {
			if p := recover(); p != nil {
				m.logDropped(ctx, k, p)
			}
		}
	}()
	cleanup()
	return false
}

// logDropped logs p, a panic that the Middleware dropped for an earlier
// one, at the error level with the stack where it was raised: the bug
// behind it (the store's, a hook's) is found from this line, since no
// recovery handler sees the panic. p is a panic that unwinding recovered,
// still unwinding, so that the stack holds the frame that raised it, or a
// keeperPanic, with the stack it was kept with. A panic of the logger's
// meanwhile is dropped as well: the logger cannot report its own.
func (m *middleware) logDropped(ctx context.Context, k Key, p any) {
	defer func() { _ = recover() }()
	l := m.cfg.logger
	if !l.Enabled(ctx, slog.LevelError) {
		return
	}
	var stack []byte
	if kp, ok := p.(*keeperPanic); ok {
		p, stack = kp.value, kp.stack
	} else {
		stack = debug.Stack()
	}
	l.LogAttrs(ctx, slog.LevelError, "idempotency: a panic was dropped: another panic, or a runtime.Goexit, goes on in its place",
		slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("panic", p), slog.String("stack", string(stack)))
}

// admissionEvent is ev about r, answered on admission (no Duration).
func admissionEvent(r *http.Request, ev Event) Event {
	ev.Method, ev.Route, ev.ctx = r.Method, r.Pattern, r.Context()
	return ev
}
