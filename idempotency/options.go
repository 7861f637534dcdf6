package idempotency

import (
	"log/slog"
	"math"
	"net/http"
	"net/textproto"
	"slices"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/hooks"
)

// Defaults of the Middleware's options.
const (
	// DefaultTTL is how long a completed outcome is kept for replay.
	DefaultTTL = 24 * time.Hour
	// DefaultLease is how long a claim stays alive without renewal; the
	// Middleware renews it every third of it until the outcome is recorded.
	DefaultLease = 10 * time.Second
	// DefaultMaxRequestBody is the largest request body, in bytes, that is
	// read and fingerprinted; larger bodies get 413.
	DefaultMaxRequestBody int64 = 1 << 20
	// DefaultMaxResponseBody is the largest response body, in bytes, that is
	// stored for replay; larger responses are streamed to the client and
	// recorded as completed but oversize.
	DefaultMaxResponseBody = 1 << 20
	// DefaultStoreTimeout bounds the recording of an outcome after the
	// handler ran: Complete or Release, retried on transient store errors
	// within it, or Commit; and each Rollback. Those calls do not follow the
	// request's cancellation: the work happened, so its outcome is recorded
	// even when the client left. The calls before the handler (Claim,
	// BeginTx) follow the request's context; a lease renewal is bounded by
	// what is left of the lease.
	DefaultStoreTimeout = 5 * time.Second
	// DefaultMaxWaiters is how many requests of one Middleware may wait at
	// once under WithWaitForResult.
	DefaultMaxWaiters = 100
)

// Option configures the Middleware. Options are applied in order; a later
// option overrides an earlier one of the same kind, except WithReplayHeaders
// and WithHook, which add up. A nil Option is ignored. An Option is a
// plain function: one may be given to several Middlewares, from any
// goroutine.
type Option func(*config)

type config struct {
	ttl            time.Duration
	lease          time.Duration
	scope          func(*http.Request) (string, error)
	methods        []string // sorted, each once: a scan of two or three is cheaper than a map's lookup
	keyRequired    bool
	wait           time.Duration
	maxWaiters     int
	maxRequestBody int64
	maxResponse    int
	replayHeaders  map[string]bool
	failOpen       bool
	logger         *slog.Logger
	hooks          hooks.List[Event]
	storeTimeout   time.Duration
	clock          clock.Clock
}

func newConfig(opts []Option) *config {
	defaultReplayHeaders := contract.ReplayHeaders()
	c := &config{
		ttl:            DefaultTTL,
		lease:          DefaultLease,
		methods:        []string{http.MethodPatch, http.MethodPost},
		maxRequestBody: DefaultMaxRequestBody,
		maxResponse:    DefaultMaxResponseBody,
		replayHeaders:  make(map[string]bool, len(defaultReplayHeaders)),
		storeTimeout:   DefaultStoreTimeout,
		maxWaiters:     DefaultMaxWaiters,
		clock:          clock.Monotonic, // its times are only compared and waited for
	}
	for _, h := range defaultReplayHeaders {
		c.replayHeaders[h] = true // canonical already
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// WithTTL sets how long an entry is kept after it was claimed or completed.
// A retry after the TTL runs the handler again. A claim whose handler is
// still running is kept for at least one lease and renewed, whatever the TTL,
// so a short TTL never frees a key under a slow handler; in transactional
// mode the claim is held by its transaction until the commit, whatever the
// TTL, and the outcome is kept for the TTL from then on. d <= 0 keeps
// DefaultTTL (24 h).
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ttl = d
		}
	}
}

// TTL returns the TTL that the Middleware given opts (the same options as
// given to Middleware) keeps its entries for: that of the last WithTTL
// with d > 0, or DefaultTTL, to the nanosecond. Like OpenAPI, whose
// Policy.TTLSeconds is a float number of seconds that cannot hold every
// Duration, it reads the options only.
func TTL(opts ...Option) time.Duration {
	return newConfig(opts).ttl
}

// WithLease sets the claim lease: how long an entry in progress blocks other
// requests if its instance stops renewing it (crashed, partitioned, frozen).
// The Middleware renews it every d/3 until the outcome is recorded, so d
// bounds only how long a crash wedges a key, not how long a handler may run.
// The lease holds for store round trips up to d/4 (see "Lease and TTL" in
// the package documentation); a claim answered with less than d/2 left does
// not start the handler. Keep it a few seconds: much shorter and a GC pause
// or slow store call lets another instance take over a live request. d <= 0
// keeps DefaultLease (10 s). The lease is not used in transactional mode.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.lease = d
		}
	}
}

// WithScope sets the function naming who owns a request's key (a tenant, an
// API principal). Requests from different scopes never share keys. An error
// fails the request closed with a 500 problem (ProblemScopeUnavailable). A
// nil f keeps the default: every request is in the scope "" (one tenant).
// f runs on the request goroutine after the body was read; it should not
// read the body (the handler would miss what it read) and must be safe for
// concurrent use. A panic of f goes on, after the request gave its
// OutcomeScopeError event with no status. The scope is stored with each key and named in the
// logger's lines (see WithLogger): return an identifier of the principal,
// never a credential such as the Authorization header's value.
func WithScope(f func(*http.Request) (string, error)) Option {
	return func(c *config) { c.scope = f }
}

// WithMethods sets the HTTP methods the Middleware protects; requests with
// other methods pass straight through. The default is POST and PATCH.
// Methods are matched as given, case-sensitively (HTTP methods are), so
// use the http.MethodXxx constants. Calling it with no methods protects none.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		c.methods = slices.Compact(slices.Sorted(slices.Values(methods)))
	}
}

// protects reports whether requests with the method m are protected (see
// WithMethods).
func (c *config) protects(m string) bool {
	for _, p := range c.methods {
		if p == m {
			return true
		}
	}
	return false
}

// WithKeyRequired makes a protected request without an Idempotency-Key fail
// with a 400 problem (ProblemMissingKey). By default (false) such a request
// passes through unprotected.
func WithKeyRequired(required bool) Option {
	return func(c *config) { c.keyRequired = required }
}

// WithWaitForResult makes a request that finds its key in progress wait up
// to d for the first request to finish, then answer with its replay (or run
// the handler itself if the first one released the claim or its lease
// lapsed). When the store implements Watcher (memstore, redisstore and
// pgstore do), the waiter is woken by the store's notification and polls
// only once a second as a fallback, or when the holder's lease is due to
// lapse; otherwise it polls, starting at 10 ms and doubling up to 200 ms.
// pgstore's transactional mode sends no notification to waiters (a claim
// row is not visible, so not markable, until its transaction commits): a
// waiter's own claim waits for the holder's transaction, up to the lock
// timeout, and replays as soon as it commits; a holder that runs longer
// leaves the waiter pausing up to a second between such claims.
// The wait ends early when the request's context is done. When d passes
// the request gets the usual 409. At most WithMaxWaiters requests wait at
// once; the others get 409 at once. d <= 0 (the default) answers 409 at
// once, except where the store's claim itself waits: in pgstore's
// transactional mode it waits for the holder's transaction, up to the lock
// timeout, and replays when that commits.
func WithWaitForResult(d time.Duration) Option {
	return func(c *config) {
		c.wait = max(d, 0)
	}
}

// WithMaxWaiters bounds how many requests of this Middleware wait at once
// under WithWaitForResult, so that a burst of duplicates cannot tie up
// goroutines and store capacity; a request over the bound gets 409 at once.
// n <= 0 keeps DefaultMaxWaiters (100). It does not bound the duplicates
// that wait inside the store's claim: in pgstore's transactional mode each
// waits for the holder's row lock, holding a pool connection, up to the
// lock timeout, whatever WithWaitForResult says.
func WithMaxWaiters(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxWaiters = n
		}
	}
}

// WithMaxRequestBody sets the largest request body, in bytes, the Middleware
// reads to fingerprint it; a larger body gets a 413 problem before anything
// runs. n <= 0 keeps DefaultMaxRequestBody (1 MiB).
func WithMaxRequestBody(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxRequestBody = n
		}
	}
}

// WithMaxResponseBody sets the largest response body, in bytes, stored for
// replay. A larger response is streamed to its client as it is written and
// recorded as completed but oversize: retries get a 410 problem
// (ProblemResponseTooLarge) and the handler never runs again. In
// transactional mode the whole response is buffered until the commit
// whatever its size. n <= 0 keeps DefaultMaxResponseBody (1 MiB).
func WithMaxResponseBody(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxResponse = int(min(n, math.MaxInt)) // the body is buffered in memory
		}
	}
}

// WithReplayHeaders adds response headers to the replay allow-list (by
// default Content-Type, Location, ETag, Last-Modified, Link and
// Content-Location). Only allow-listed headers are stored, and, with a
// body the handler encoded, its Content-Encoding and Vary. Set-Cookie, Date,
// Retry-After, rate-limit headers (RateLimit*, X-RateLimit*), hop-by-hop
// headers, Content-Length and Idempotent-Replayed are never stored or
// replayed, even when named here.
func WithReplayHeaders(names ...string) Option {
	return func(c *config) {
		for _, n := range names {
			k := textproto.CanonicalMIMEHeaderKey(n)
			if !neverReplayed(k) {
				c.replayHeaders[k] = true
			}
		}
	}
}

// WithFailOpen makes the Middleware run the handler unprotected when the
// store fails on claim, instead of answering 503 (the default, fail closed).
// Fail open trades the exactly-once guarantee for availability: use it only
// when a duplicate is cheaper than an outage. In transactional mode the
// handler then runs without a transaction in its context. A claim that failed
// because the request's context ended (the client left) still gets 503.
func WithFailOpen(open bool) Option {
	return func(c *config) { c.failOpen = open }
}

// WithLogger sets the logger for lost leases, store failures and other
// surprises. Nil (the default) logs nothing. Normal outcomes are not logged;
// use WithHook to count them. A line names the request by its scope and
// key (and fencing token), never by its body or headers. The logger is
// called on the request's goroutine, where its panic fails the request as
// a handler's would, and by the lease keeper on its timer: a panic there
// is recovered, the lease is kept as before, and the request fails with
// it once its outcome is recorded, so that it reaches whatever recovers
// the request's panics rather than ending the process. A panic that the
// Middleware drops because another is in flight (see WithHook, and the
// package documentation on a handler's panic) is logged at the error
// level, with its value and stack, unless it is the logger's own.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithHook adds a function called with each Event, for metrics. It may be
// given several times (instrumentation beside the application's own hook,
// say): every hook is called, in the order given. A hook runs synchronously
// on the request's goroutine, before the answer the event describes is
// written, so it must be quick and safe for concurrent use. A hook that
// panics fails that request as a handler's panic after its response went
// out would: the panic goes on once the hooks given after it had the event
// and that answer was written all the same, so that the event's Status is
// the status sent (after a run, the answer is the outcome recorded, which
// a retry replays). A hook's panic never replaces one already in flight
// (the handler's, the store's, the logger's, or an earlier hook's on the
// same event): that one goes on as it was, and the hook's is dropped (and
// logged, see WithLogger). A nil f adds nothing; there is no hook by
// default.
func WithHook(f func(Event)) Option {
	return func(c *config) { c.hooks.Add(f) }
}

// withClock is a test seam: the Middleware reads time and arms its timers
// on clk (lease renewals, waiting, retries of Complete), so that lease
// tests run on fake time.
func withClock(clk clock.Clock) Option {
	return func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// withStoreTimeout is a test seam for DefaultStoreTimeout.
func withStoreTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.storeTimeout = d
		}
	}
}
