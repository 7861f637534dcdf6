package mockserver

import (
	"log/slog"
	"net"
	"strings"

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
}

// WithStore makes the server keep its idempotency entries in st instead of
// a fresh in-memory store of its own. Servers given the same shared store
// (redisstore, pgstore) behave as instances of one service: a key claimed on
// one is in progress or replayed on the others. The server does not close
// st. A store that implements idempotency.TxStore is used in lease mode all
// the same, because the mock server's ledger lives in memory, outside any
// database transaction. A nil st keeps the default.
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

// WithBalance sets the initial balance of currency (three letters, any case)
// in minor units. Currencies without one start at DefaultBalance. It panics
// if currency is not three letters.
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

func upper(s string) string { return strings.ToUpper(s) }
