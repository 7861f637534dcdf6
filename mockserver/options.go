package mockserver

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// Option configures a Server in New. Options apply in order; a nil Option
// is ignored. An Option is a plain function: one may be given to several
// New calls, from any goroutine.
type Option func(*config)

type config struct {
	store     idempotency.Store
	idemOpts  []idempotency.Option
	listener  net.Listener
	balances  map[string]int64
	namespace string
	logger    *slog.Logger
	ledger    Ledger
	unkeyed   bool
	work      time.Duration

	metrics     http.Handler                    // served at MetricsPath; nil: none
	wrapHandler func(http.Handler) http.Handler // wraps the payment handler inside the Middleware; nil: none

	admin         bool          // serve the admin API
	ledgerTimeout time.Duration // bounds each ledger call but Pay
	readTimeout   time.Duration // <= 0: no limit
	idleTimeout   time.Duration // <= 0: no limit
}

// DefaultReadTimeout is how long a request may take to arrive, headers and
// body, unless WithReadTimeout says otherwise.
const DefaultReadTimeout = 10 * time.Second

// DefaultIdleTimeout is how long an idle keep-alive connection stays open,
// unless WithIdleTimeout says otherwise.
const DefaultIdleTimeout = 60 * time.Second

// maxHeaderTimeout bounds the wait for a request's headers, also when the
// read timeout is longer or off.
const maxHeaderTimeout = 10 * time.Second

// defaultConfig is the configuration the options of New change.
func defaultConfig() config {
	return config{admin: true, readTimeout: DefaultReadTimeout, idleTimeout: DefaultIdleTimeout,
		ledgerTimeout: defaultLedgerTimeout}
}

// WithStore makes the server keep its idempotency entries in st instead of
// a fresh in-memory store of its own. Servers given the same shared store
// (redisstore, pgstore) behave as instances of one service: a key claimed on
// one is in progress or replayed on the others; give them a shared ledger
// too (WithLedger). The server does not close st. A store that implements
// idempotency.TxStore runs the Middleware in transactional mode when the
// ledger is a TxLedger (pgledger), and in lease mode otherwise, because a
// rollback could not undo a payment in any other ledger. A nil st keeps the
// default.
func WithStore(st idempotency.Store) Option {
	return func(c *config) { c.store = st }
}

// WithIdempotencyOptions passes opts to the idempotency middleware in front
// of POST /payments, for example idempotency.WithTTL,
// idempotency.WithLease or idempotency.WithWaitForResult. The server applies
// its own options after them: the key is required, POST is the protected
// method, and the scope is the server's namespace and key epoch (see
// ExpireKeys).
func WithIdempotencyOptions(opts ...idempotency.Option) Option {
	return func(c *config) { c.idemOpts = append(c.idemOpts, opts...) }
}

// WithListener makes the server accept connections on ln, for example one
// bound to a fixed address; New takes ownership and Close closes it. A nil
// ln keeps the default: a fresh listener on a loopback port.
func WithListener(ln net.Listener) Option {
	return func(c *config) { c.listener = ln }
}

// WithBalance sets the opening balance of currency (three letters, any
// case) in minor units, in the server's own memory ledger. Currencies
// without one start at DefaultBalance. A ledger given to WithLedger has
// opening balances of its own. It panics if currency is not three letters.
func WithBalance(currency string, amount int64) Option {
	if !isCurrency(currency) {
		panic("mockserver: WithBalance: currency " + currency + " is not three letters")
	}
	return func(c *config) {
		if c.balances == nil {
			c.balances = make(map[string]int64)
		}
		c.balances[upper(currency)] = amount
	}
}

// WithNamespace prefixes the idempotency scope of the server with ns, so that
// test runs sharing a store do not see each other's keys while servers with
// the same namespace do. The empty string keeps the default, "mockserver".
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace = ns }
}

// WithLogger makes the server log executions and injected faults to l, and
// hands l to the idempotency middleware (an idempotency.WithLogger given
// through WithIdempotencyOptions wins). A nil l, the default, logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithLedger makes the server keep its payments and balances in l instead of
// a ledger in its own memory: mockserver/redisledger or mockserver/pgledger,
// for servers (cmd/mockserver processes) that share a store and must share
// their records, so that every instance answers GET /payments and GET
// /balance alike and a payment made by an instance that died is not lost.
// The server does not close l. A nil l keeps the default.
func WithLedger(l Ledger) Option {
	return func(c *config) { c.ledger = l }
}

// WithUnkeyedPayments makes every execution of a payment a payment of its
// own, recorded under a ref of its own instead of the operation's
// idempotency.DerivedKey: the naive handler, whose side effect a lease
// cannot protect. A re-run after a takeover (the first instance died after
// paying, or was paused past its lease) then pays a second time. It exists
// to show, and to measure, what keyed side effects prevent; transactional
// mode prevents it too.
func WithUnkeyedPayments() Option {
	return func(c *config) { c.unkeyed = true }
}

// WithPaymentWork makes the payment handler work for d after the payment
// is recorded and before it answers, as a handler that calls a slow
// downstream service after its side effect would. An instance that dies in
// that time has paid but not recorded its answer: what the chaos suite
// needs to show what keyed payments prevent. The work does not stop when
// the request's context ends (the payment happened; its answer is still
// sent). d <= 0, the default, answers at once.
func WithPaymentWork(d time.Duration) Option {
	return func(c *config) { c.work = max(d, 0) }
}

// WithAdminAPI serves the admin API under AdminPrefix when on is true, the
// default, and removes it when on is false: every path under AdminPrefix is
// then answered 404 with a problem of type ProblemNotFound, so that nobody
// who can reach the port injects faults or reads the keys over HTTP. The Go
// methods (FailNext, Stats, ...) work either way. New always listens on a
// loopback address; this matters for a listener of WithListener bound to
// another address (cmd/mockserver -admin).
func WithAdminAPI(on bool) Option {
	return func(c *config) { c.admin = on }
}

// WithReadTimeout bounds how long a request may take to arrive, from its
// first byte to the end of its body (http.Server.ReadTimeout): a client that
// sends its body slowly, or stops sending it, has its connection closed
// after d. Its headers must arrive within d too, and never take more than
// 10 s. The handler's own work is not bounded by d: an injected delay or
// latency outlasts it. Injected latency runs before the body is read, so
// after it the rest of the body has d anew to arrive: the server's wait
// never turns a request that arrived in time into a 400. d <= 0 removes the
// limit on the body (the headers keep theirs). The default is
// DefaultReadTimeout.
func WithReadTimeout(d time.Duration) Option {
	return func(c *config) { c.readTimeout = d }
}

// WithIdleTimeout closes a keep-alive connection that has waited d for its
// next request (http.Server.IdleTimeout). d <= 0 keeps idle connections
// open until the client or Close closes them. The default is
// DefaultIdleTimeout.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) { c.idleTimeout = d }
}

// MetricsPath is where WithMetricsHandler serves its handler.
const MetricsPath = "/metrics"

// WithMetricsHandler serves h at GET (and HEAD) MetricsPath, for example the
// Prometheus text of the server's instrumentation (cmd/mockserver -metrics
// does that with the otelidempotency instruments). Injected latency does not
// apply to it, so a scrape is not slowed down by the faults it measures. A
// nil h, the default, serves nothing there: MetricsPath is a 404 problem
// like any unknown path.
func WithMetricsHandler(h http.Handler) Option {
	return func(c *config) { c.metrics = h }
}

// WithHandlerMiddleware wraps the payment handler with mw inside the
// idempotency Middleware, where it runs under the claim: the place of
// instrumentation of the handler's runs (otelidempotency's
// Instrumentation.Handler). mw must pass every request on to the handler
// it wraps. A nil mw, the default, wraps nothing; a later option replaces an
// earlier one.
func WithHandlerMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(c *config) { c.wrapHandler = mw }
}

func upper(s string) string { return strings.ToUpper(s) }
