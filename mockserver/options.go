package mockserver

import (
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// Option configures a Server in New. Options apply in order; a nil Option
// is ignored.
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

func upper(s string) string { return strings.ToUpper(s) }
