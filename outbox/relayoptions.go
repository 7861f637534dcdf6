package outbox

import (
	"io"
	"log/slog"
	"math"
	"time"
)

// RelayOption configures a Relay; options are applied once, in
// (*Outbox).Relay, and may be shared between goroutines.
type RelayOption func(*relayConfig)

type relayConfig struct {
	batchSize      int
	workers        int
	pollInterval   time.Duration
	listen         bool
	maxAttempts    int
	backoffMin     time.Duration
	backoffMax     time.Duration
	publishTimeout time.Duration
	retention      time.Duration
	cleanupEvery   time.Duration
	cleanupBatch   int
	settleTimeout  time.Duration
	logger         *slog.Logger
}

func defaultRelayConfig() relayConfig {
	return relayConfig{listen: true}
}

func (c *relayConfig) normalise() {
	if c.batchSize <= 0 {
		c.batchSize = 100
	}
	// The claim's window, 4 × the batch size + 64, is counted in an int64,
	// which this bound keeps from wrapping around.
	c.batchSize = min(c.batchSize, math.MaxInt32)
	if c.workers <= 0 {
		c.workers = 1
	}
	if c.pollInterval <= 0 {
		c.pollInterval = time.Second
	}
	if c.maxAttempts <= 0 {
		c.maxAttempts = 10
	}
	// The attempts column is an integer: a larger limit could not be
	// encoded in the failure mark, which would fail for ever.
	c.maxAttempts = min(c.maxAttempts, math.MaxInt32)
	if c.backoffMin <= 0 {
		c.backoffMin = 100 * time.Millisecond
	}
	if c.backoffMax <= 0 {
		c.backoffMax = time.Minute
	}
	c.backoffMax = max(c.backoffMax, c.backoffMin)
	if c.publishTimeout <= 0 {
		c.publishTimeout = 30 * time.Second
	}
	if c.retention == 0 {
		c.retention = 24 * time.Hour
	}
	if c.cleanupEvery <= 0 {
		c.cleanupEvery = time.Minute
	}
	if c.cleanupBatch <= 0 {
		c.cleanupBatch = 1000
	}
	if c.settleTimeout <= 0 {
		c.settleTimeout = defaultSettleTimeout
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// WithBatchSize sets how many messages one Publish call gets at most; 0
// means 100, and a size above math.MaxInt32 means math.MaxInt32.
func WithBatchSize(n int) RelayOption { return func(c *relayConfig) { c.batchSize = n } }

// WithWorkers sets how many batches a Relay's Run has in flight at once,
// each in a transaction of its own (0 means 1): the workers of one relay
// share the work as several relays do, Key by Key, so a Key's order holds;
// more workers hide the database's round trips behind the broker's when
// there are many Keys with messages waiting. When the Outbox's pool allows
// at least two connections per worker (pgxpool's MaxConns), each worker
// holds two and overlaps its batches (it marks one and claims the next
// while it publishes another, see Run); otherwise one, and its batches run
// one after the other. A worker that cannot get its second connection at
// once (the pool shared with other relays or other work) runs on one.
func WithWorkers(n int) RelayOption { return func(c *relayConfig) { c.workers = n } }

// WithPollInterval sets how often the relay looks for messages when no
// notification came; 0 means one second. It bounds the delay of a message
// whose NOTIFY was lost (the listening connection down) and of a retry,
// and is how long a topic the broker refused is left out of the claims
// (see the package documentation, "Costs").
func WithPollInterval(d time.Duration) RelayOption {
	return func(c *relayConfig) { c.pollInterval = d }
}

// WithListen turns the LISTEN/NOTIFY wake-up on (the default) or off
// (polling only).
func WithListen(on bool) RelayOption { return func(c *relayConfig) { c.listen = on } }

// WithMaxAttempts sets after how many failed publications a message is
// marked failed; 0 means 10, and a limit above math.MaxInt32 (the range
// of the attempts column) means math.MaxInt32, for ever in practice.
func WithMaxAttempts(n int) RelayOption { return func(c *relayConfig) { c.maxAttempts = n } }

// WithBackoff sets the delay before a failed message is tried again, min
// after its first failure, doubling up to max; also the relay's wait after
// a database error. 0 means 100 ms and one minute.
func WithBackoff(minDelay, maxDelay time.Duration) RelayOption {
	return func(c *relayConfig) { c.backoffMin, c.backoffMax = minDelay, maxDelay }
}

// WithPublishTimeout bounds one Publish call; 0 means 30 s. The batch's
// row locks are held meanwhile.
func WithPublishTimeout(d time.Duration) RelayOption {
	return func(c *relayConfig) { c.publishTimeout = d }
}

// WithSettleTimeout bounds what a relay still writes after the context of
// Run (or RunOnce) ended: the marks of the batches the Publisher took and
// the end of their transactions, all under one bound counted from the end
// of the context, so that a stopped relay records what it published
// without waiting for ever on a database that stopped answering. A batch
// whose marks do not finish within it is published again later, as
// at-least-once delivery allows. Nothing is bounded while the context is
// live, unless the Publisher panicked: a panic ends the call as the end of
// its context would, the bound counted from the panic (see Run). 0 means
// 5 s.
func WithSettleTimeout(d time.Duration) RelayOption {
	return func(c *relayConfig) { c.settleTimeout = d }
}

// WithRetention sets how long published rows are kept (for inspection,
// and so that enqueueing their IDs again stays a no-op); 0 means 24 hours,
// a negative duration keeps them forever. They are deleted every
// cleanupEvery (0 means one minute), at most batch rows per statement (0
// means 1000), so a cleanup never holds a long lock.
func WithRetention(d, cleanupEvery time.Duration, batch int) RelayOption {
	return func(c *relayConfig) { c.retention, c.cleanupEvery, c.cleanupBatch = d, cleanupEvery, batch }
}

// WithRelayLogger sets where the relay reports publisher and database
// errors; nil means nowhere. A panic of the logger's handler stops Run as
// the Publisher's does (see Run).
func WithRelayLogger(l *slog.Logger) RelayOption { return func(c *relayConfig) { c.logger = l } }
