package pgstore

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/replaymix"
)

// DefaultTable is the table name used when WithTable is not given.
const DefaultTable = "idempotency_entries"

// DefaultLockTimeout is how long a transactional Claim waits for another
// transaction's uncommitted claim on the same key when WithLockTimeout is not
// given.
const DefaultLockTimeout = 2 * time.Second

// DefaultReapBatch is the number of rows DeleteExpired removes per statement
// in the background reaper when WithReapBatch is not given.
const DefaultReapBatch = 1000

// Option configures New and NewTx. Options apply in order; a nil Option is
// ignored. An Option is a plain function: one may be given to several New
// and NewTx calls, from any goroutine.
type Option func(*config)

type config struct {
	table        string
	lockTimeout  time.Duration
	reapBatch    int
	logger       *slog.Logger
	renewalConns int
	replayPath   replaymix.Mode
	pooler       Pooler
	listenConfig *pgx.ConnConfig
}

func defaultConfig() config {
	return config{
		table:        DefaultTable,
		lockTimeout:  DefaultLockTimeout,
		reapBatch:    DefaultReapBatch,
		renewalConns: DefaultRenewalConns,
	}
}

// WithTable sets the table that holds the entries: a lowercase SQL identifier
// ([a-z_][a-z0-9_]*, at most 48 bytes), optionally qualified by a schema
// ("myschema.entries") whose name does not begin with "pg_" (PostgreSQL's
// own schemas, pg_temp among them, a table per session). The default is DefaultTable. New and NewTx panic when
// the name is not valid, as it is a programming error; use ValidateTable to
// check a name that comes from configuration.
func WithTable(name string) Option {
	return func(c *config) { c.table = name }
}

// WithLockTimeout sets how long a transactional Claim (see NewTx) waits for
// another transaction's uncommitted claim on the same key before it reports
// the key in progress. It is set with SET LOCAL for the claim statement only,
// so the handler's own statements keep the session's lock_timeout. Zero or
// negative means DefaultLockTimeout; the value is rounded up to whole
// milliseconds. A session whose statement_timeout (set for the role or the
// database, say) is shorter waits nine tenths of that instead, so that the
// wait ends as a key in progress rather than as a statement that failed.
// Lease mode ignores it.
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) { c.lockTimeout = d }
}

// WithReapBatch sets how many expired rows the background reaper deletes per
// statement. Zero or negative means DefaultReapBatch.
func WithReapBatch(n int) Option {
	return func(c *config) { c.reapBatch = n }
}

// WithLogger sets the logger the background reaper and the notification
// listener (see Store.Watch) report failures to. Nil (the default) means
// silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// logger returns the WithLogger logger, or one that discards.
func (s *Store) logger() *slog.Logger {
	if s.cfg.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.cfg.logger
}

// WithRenewalConns sets how many connections of its own the Store keeps
// open for lease renewals (DefaultRenewalConns, 2, by default), beside the
// pool given to New; under load they grow to as many as that pool's
// MaxConns. They are opened in the background at the Store's first renewal
// (which, like any until one is open, uses the main pool), closed by
// Close, and made from the pool's configuration without its liveness ping,
// so that a renewal is one round trip and never waits behind requests for
// a connection. n <= 0 renews over the main pool instead, for deployments
// that must not open more connections (PgBouncer with a tight budget):
// renewals then still get the quarter of the pool that Claim and Get leave
// free, but may need an extra round trip for pgxpool's ping of a
// connection idle over a second.
func WithRenewalConns(n int) Option {
	return func(c *config) { c.renewalConns = n }
}

// WithReplayFastPath makes Claim read the key with a
// primary-key SELECT before every claim, and answer a completed entry from
// it, running the claim statement only when the key is absent, in progress
// or expired. A replay then costs the database what a SELECT costs, instead
// of the claim statement's (an upsert that writes nothing, about twice the
// server time), and a first execution one round trip more (three instead
// of two, the SELECT finding nothing). By default the Store does this only
// while replays are frequent (see "The replay fast path" in the package
// documentation); this option does it always, WithoutReplayFastPath never.
// Reading without the claim is safe: no statement changes a completed
// entry before it expires (Complete, Renew, Release and the claim's upsert
// all require an entry in progress or expired), and the SELECT only
// returns an entry that has not expired at its own statement time, as the
// claim statement would. In transactional mode the SELECT replaces the claim
// batch of a replay (one round trip either way, but no transaction begun
// and no intended error in the server log), and a first execution takes
// three round trips.
func WithReplayFastPath() Option {
	return func(c *config) { c.replayPath = replaymix.Always }
}

// WithoutReplayFastPath makes every Claim the one claim statement (the
// claim batch in transactional mode), whatever the share of replays: a
// first execution always costs two round trips and a replay one claim.
func WithoutReplayFastPath() Option {
	return func(c *config) { c.replayPath = replaymix.Never }
}
