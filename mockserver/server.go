package mockserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
)

// Server is a running payments API that implements the idempotency contract,
// with faults to inject and counters to inspect. It is shaped like
// httptest.Server: New starts it, URL is its base URL, Close stops it. Most
// tests want New, Client (wrapped with saferetry), a fault such as FailNext,
// then Executions or Stats to assert exactly-once. The zero value is not
// usable: create a Server with New.
//
// All methods are safe for concurrent use by multiple goroutines, also while
// requests are being served.
type Server struct {
	// URL is the base URL of the server, "http://ipaddr:port" without a
	// trailing slash.
	URL string

	ts        *httptest.Server
	store     idempotency.Store
	closeOnce sync.Once
	closeFn   func() // closes a store the server owns; nil otherwise
	logger    *slog.Logger
	namespace string
	epoch     atomic.Int64
	lastScope atomic.Pointer[epochScope] // the scope of a recent epoch

	faults  faults
	insp    inspector
	ledger  Ledger
	refKeep time.Duration // the idempotency TTL: how long a payment's ref finds it (Ledger.Pay)
	maxBody int64         // the largest payment body read: the Middleware's (WithMaxRequestBody), which read it first
	ledgerT time.Duration // bounds each ledger call but Pay (ledgerContext)
	unkeyed bool
	work    time.Duration
	userSt  idempotency.Store // as given to WithStore
	openapi []byte            // the OpenAPI description, served at OpenAPIPath
}

// leaseMode hides every method of st but those of idempotency.Store (and
// idempotency.Watcher, when st has it), so that the Middleware runs in
// lease mode even on a TxStore.
func leaseMode(st idempotency.Store) idempotency.Store {
	if w, ok := st.(idempotency.Watcher); ok {
		return struct {
			idempotency.Store
			idempotency.Watcher
		}{st, w}
	}
	return struct{ idempotency.Store }{st}
}

// New starts a Server and returns it; Close stops it. By default it listens
// on a loopback port and keeps idempotency entries in a fresh memstore; see
// the options. Like httptest.NewServer, it panics if it cannot listen.
func New(opts ...Option) *Server {
	c := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	s := &Server{
		logger:    c.logger,
		namespace: c.namespace,
		ledger:    c.ledger,
		refKeep:   idempotencyTTL(c.idemOpts),
		maxBody:   idempotency.OpenAPI(c.idemOpts...).Policy.Fingerprint.MaxBodyBytes,
		ledgerT:   c.ledgerTimeout,
		unkeyed:   c.unkeyed,
		work:      c.work,
		userSt:    c.store,
	}
	if s.ledger == nil {
		s.ledger = newMemLedger(c.balances)
	}
	if s.namespace == "" {
		s.namespace = "mockserver"
	}
	_, txLedger := s.ledger.(TxLedger)
	_, txStore := c.store.(idempotency.TxStore)
	switch {
	case c.store != nil && txStore && txLedger:
		s.store = c.store // transactional mode: the payment joins the claim's transaction
	case c.store != nil:
		s.store = leaseMode(c.store)
	default:
		ms := memstore.New()
		s.store = ms
		s.closeFn = func() { _ = ms.Close() }
	}

	ln := c.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
				panic(fmt.Sprintf("mockserver: failed to listen on a port: %v", err))
			}
		}
	}
	s.openapi = openAPIDocument(s.idempotencyOptions(c))
	s.ts = &httptest.Server{Listener: ln, Config: httpServer(c, s.routes(c))}
	s.ts.Start()
	s.URL = s.ts.URL
	return s
}

// httpServer is the http.Server of h with the timeouts of c.
func httpServer(c config, h http.Handler) *http.Server {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: maxHeaderTimeout, IdleTimeout: c.idleTimeout}
	if c.readTimeout > 0 {
		hs.ReadTimeout = c.readTimeout
		hs.ReadHeaderTimeout = min(c.readTimeout, maxHeaderTimeout)
	}
	if c.idleTimeout <= 0 {
		hs.IdleTimeout = -1 // no limit; 0 would mean ReadTimeout
	}
	return hs
}

// Close stops accepting connections, waits for the requests in flight to be
// answered (injected latency and delays included), closes idle connections,
// and closes the store if the server made it itself. It is safe to call
// Close more than once.
func (s *Server) Close() {
	s.ts.Close()
	s.closeOnce.Do(func() {
		if s.closeFn != nil {
			s.closeFn()
		}
	})
}

// Client returns an *http.Client configured for the server, whose idle
// connections Close shuts. It does not retry: wrap its Transport with
// saferetry to get safe retries.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Store returns the idempotency store the server uses: the one given to
// WithStore, or its own memstore (which Close closes). It is safe for
// concurrent use.
func (s *Server) Store() idempotency.Store {
	if s.userSt != nil {
		return s.userSt
	}
	return s.store
}

// Transactional reports whether the server runs its idempotency Middleware
// in transactional mode: it was given an idempotency.TxStore and a TxLedger
// (see WithLedger), so every payment commits with its claim and stored
// answer. It is safe for concurrent use.
func (s *Server) Transactional() bool {
	_, ok := s.store.(idempotency.TxStore)
	return ok
}

// scope is the idempotency scope of every key: the namespace and the key
// epoch that ExpireKeys advances.
func (s *Server) scope(*http.Request) (string, error) {
	e := s.epoch.Load()
	if sc := s.lastScope.Load(); sc != nil && sc.epoch == e {
		return sc.name, nil
	}
	sc := &epochScope{epoch: e, name: s.namespace + "/epoch-" + strconv.FormatInt(e, 10)}
	s.lastScope.Store(sc)
	return sc.name, nil
}

// epochScope is the scope of one key epoch, kept so that every request
// does not build it anew.
type epochScope struct {
	epoch int64
	name  string
}

// reqState follows one request to POST /payments through the middleware to
// the handler and back.
type reqState struct {
	key      string    // the Idempotency-Key as received
	pos      keyPos    // where the inspector keeps key's record
	arrived  time.Time // when the request arrived, for the attempt's timing
	injected atomic.Bool
	executed atomic.Bool
	sent     atomic.Bool // the answer's header went to the client
	place    int         // the attempt's place in its key's history, once sent (the request's goroutine's)
	drop     atomic.Bool // the answer is swallowed and the connection closed (outcomeSettled)
	// answer holds the header values of the request's 201 (see
	// answerValues), in the state's allocation rather than one of their
	// own; answerTaken says that a handler call took them.
	answer      [3]string
	answerTaken atomic.Bool
}

// answerValues returns an array for the three header values of a 201
// answer: st's own for the first call of the payment handler under st,
// so that the answer costs no allocation for them, and a new one for any
// later call (a handler middleware, WithHandlerMiddleware, may run the
// handler again with the same request), whose answer must not change the
// values of an earlier one's header.
func (st *reqState) answerValues() *[3]string {
	if st.answerTaken.CompareAndSwap(false, true) {
		return &st.answer
	}
	return new([3]string)
}

type stateKey struct{}

// observed is what observe keeps of one request, in one allocation: its
// state, the writer its answer goes through, and the context that carries
// the state to the handler (stateFrom), where context.WithValue and two
// more allocations would do the same. Context is the request's own, which
// a context derived from observed is canceled with as from it (observed
// hides none of its methods but Value).
type observed struct {
	context.Context
	st reqState
	w  attemptWriter
}

// Value returns the request's state for stateKey{}, nil for refusedKey{},
// and what the request's own context holds for any other key. A refused
// request is marked (refusing) by requireJSON, which runs under observe:
// the mark is in a context derived from o or nowhere, so a lookup of it
// that reaches o (refusalOf, twice a payment) stops here, short of the
// connection's contexts under it.
func (o *observed) Value(key any) any {
	switch key {
	case stateKey{}:
		return &o.st
	case refusedKey{}:
		return nil
	}
	return o.Context.Value(key)
}

func stateFrom(ctx context.Context) *reqState {
	if st, ok := ctx.Value(stateKey{}).(*reqState); ok {
		return st
	}
	return &reqState{}
}

// arrivalKey carries, in a request's context, when it arrived, if that was
// before injected latency.
type arrivalKey struct{}

// arrival returns when the request of ctx arrived: before its injected
// latency, or now when it had none.
func arrival(ctx context.Context) time.Time {
	if t, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

// counterKey returns the key that r's attempt is counted under: its
// Idempotency-Key as the middleware reads it, so that attempts and
// executions of one operation meet under one key whatever its wire form,
// or the header's first value as it came when it is not a valid key.
func counterKey(r *http.Request) string {
	// The name is canonical: indexed as Header.Values would after
	// canonicalising it, without that work.
	vals := r.Header[idempotency.HeaderIdempotencyKey]
	if k, err := contract.ParseKeyFields(vals); err == nil {
		return k
	}
	if len(vals) > 0 {
		return vals[0]
	}
	return ""
}

// observe counts the attempt, injects FailNext failures before anything
// runs, and drops the connection of an execution chosen by
// DropAfterCommitNext once the middleware has stored its outcome (see
// outcomeSettled).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := &observed{Context: r.Context()}
		st := &o.st
		st.key, st.arrived = counterKey(r), arrival(r.Context())
		st.pos = s.insp.attempt(st.key)
		o.w = attemptWriter{ResponseWriter: w, s: s, st: st}
		aw := &o.w

		if status := s.faults.takeFail(); status != 0 {
			st.injected.Store(true)
			s.log(r.Context(), "mockserver: injected failure", "key", st.key, "status", status)
			writeProblem(aw, problem{Type: ProblemInjectedFailure, Title: http.StatusText(status), Status: status,
				Detail: "failure injected by the mock server before anything ran"})
			return
		}

		next.ServeHTTP(aw, r.WithContext(o))

		if st.drop.Load() {
			if st.sent.Load() {
				// Streamed (over the response limit) before the outcome
				// was stored: the answer is cut short instead.
				s.insp.dropped(st.key, st.place)
				s.log(r.Context(), "mockserver: cut the answer short after commit", "key", st.key)
				panic(http.ErrAbortHandler)
			}
			s.insp.answered(st.key, st.pos, Attempt{Status: 0, Outcome: OutcomeDropped}.timed(st.arrived))
			s.log(r.Context(), "mockserver: dropped the answer after commit", "key", st.key)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			// No hijacking (HTTP/2): abort the stream instead.
			panic(http.ErrAbortHandler)
		}
		if !aw.wroteHeader {
			aw.WriteHeader(http.StatusOK)
		}
	})
}

// attemptWriter records how an attempt is answered before the first byte
// goes out, and swallows the answer of an execution whose answer is to be
// dropped.
type attemptWriter struct {
	http.ResponseWriter
	s           *Server
	st          *reqState
	wroteHeader bool
}

func (w *attemptWriter) WriteHeader(code int) {
	if w.wroteHeader || code < 200 {
		return
	}
	w.wroteHeader = true
	if w.st.drop.Load() {
		return
	}
	w.st.sent.Store(true)
	w.st.place = w.s.insp.answered(w.st.key, w.st.pos, Attempt{Status: code, Outcome: w.classify(code)}.timed(w.st.arrived))
	w.ResponseWriter.WriteHeader(code)
}

func (w *attemptWriter) classify(code int) Outcome {
	switch {
	case w.st.injected.Load():
		return OutcomeInjectedFailure
	case w.st.executed.Load():
		return OutcomeExecuted
	case w.Header().Get(idempotency.HeaderReplayed) == "true":
		return OutcomeReplayed
	case code == http.StatusConflict:
		return OutcomeInProgress
	case code == http.StatusUnprocessableEntity:
		return OutcomeKeyReused
	}
	return OutcomeRejected
}

func (w *attemptWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.st.drop.Load() {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on unless the answer is to be dropped.
func (w *attemptWriter) Flush() {
	if w.st.drop.Load() {
		return
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// SetReadDeadline sets the read deadline of the connection underneath, as
// http.ResponseController.SetReadDeadline does: the idempotency
// Middleware's writer passes it on to this one, for the handler under the
// claim.
func (w *attemptWriter) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(w.ResponseWriter).SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline of the connection underneath,
// as http.ResponseController.SetWriteDeadline does (see SetReadDeadline).
// attemptWriter has no Unwrap method, which would let
// http.ResponseController reach past it to Hijack or EnableFullDuplex.
func (w *attemptWriter) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(t)
}

var _ http.Flusher = (*attemptWriter)(nil)

func (s *Server) log(ctx context.Context, msg string, args ...any) {
	if s.logger != nil {
		s.logger.InfoContext(ctx, msg, args...)
	}
}
