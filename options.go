package saferetry

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/hooks"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// Defaults, summed up in the package overview.
const (
	// DefaultMaxAttempts is the number of attempts per logical operation,
	// the first included; see [WithMaxAttempts].
	DefaultMaxAttempts = 4
	// DefaultMaxRetryAfter caps a wait taken from Retry-After; see
	// [WithMaxRetryAfter].
	DefaultMaxRetryAfter = 30 * time.Second
	// DefaultMaxBufferedBody is how many bytes of a request body without
	// GetBody are buffered to be replayed; see [WithMaxBufferedBody].
	DefaultMaxBufferedBody = 1 << 20
	// DefaultMaxErrorBody is how many bytes of an error response
	// [Client.Do] keeps in [APIError.Body]; see [WithMaxErrorBody].
	DefaultMaxErrorBody = 64 << 10

	// DefaultBudgetCapacity is the number of tokens in a Transport's retry
	// budget; see [WithRetryBudget].
	DefaultBudgetCapacity = 500
	// DefaultBudgetRetryCost is the tokens one retry costs (twice that
	// after a transport error or timeout); see [WithRetryBudget].
	DefaultBudgetRetryCost = 5
)

// Option configures a [Transport] or a [Client]. Options that do not apply
// to what is being configured are ignored ([WithBase] and [WithHTTPClient]
// by [NewTransport]). The zero Option (nil) is ignored too. Options are
// applied in order, a later one overriding an earlier one of the same kind,
// except [WithHook], whose hooks add up. An Option is a plain function:
// one may be given to several Transports and Clients, from any goroutine.
type Option func(*config)

// config is the resolved set of options; it is read-only once built.
type config struct {
	base            http.RoundTripper
	httpClient      *http.Client
	maxAttempts     int
	newBackoff      func() backoff.BackOff
	maxRetryAfter   time.Duration
	attemptTimeout  time.Duration
	maxBufferedBody int64
	maxErrorBody    int64
	keyMethods      retrypolicy.Methods
	structuredKey   bool
	classifier      Classifier
	budgetCapacity  int
	budgetCost      int
	logger          *slog.Logger
	hooks           hooks.List[Attempt]
	clock           clock.Clock

	crossOriginRedirects bool
}

func newConfig(opts []Option) *config {
	c := &config{
		maxAttempts:     DefaultMaxAttempts,
		newBackoff:      DefaultBackoff,
		maxRetryAfter:   DefaultMaxRetryAfter,
		maxBufferedBody: DefaultMaxBufferedBody,
		maxErrorBody:    DefaultMaxErrorBody,
		keyMethods:      []string{http.MethodPost, http.MethodPatch},
		budgetCapacity:  DefaultBudgetCapacity,
		budgetCost:      DefaultBudgetRetryCost,
		clock:           clock.Real,
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// DefaultBackoff returns the default schedule: exponential from 250ms,
// multiplier 2, up to 10s, and ±50% jitter around that, so a wait is at
// most 15s; no elapsed-time limit (the attempt count and the context
// bound the whole).
func DefaultBackoff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(250*time.Millisecond),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxInterval(10*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

// WithMaxAttempts sets the number of attempts per logical operation, the
// first included; 1 disables retries. n < 1 is taken as 1. The default is 4.
// net/http's own sends of an attempt again (see the package doc) are not
// attempts.
func WithMaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts = max(n, 1) }
}

// WithBackoff sets the factory of the wait schedule. It is called at most
// once per logical operation, when its first retry is scheduled, so every
// operation gets a fresh schedule, which is Reset before its first wait as
// backoff.Retry does (an ExponentialBackOff whose fields were set after
// NewExponentialBackOff starts from them only then); a schedule that
// returns backoff.Stop ends the retries. nil restores [DefaultBackoff]. The factory must be safe
// for concurrent use.
//
// The schedule is the BackOff interface of github.com/cenkalti/backoff/v4
// (NextBackOff and Reset), the one type of another module in this
// package's API, by choice: its schedules (exponential, constant, with a
// limit on retries or elapsed time) are what Go programs already use, and
// a type of our own with the same two methods would only make users wrap
// them. Any type with those methods will do; the package depends on v4 for
// nothing else but DefaultBackoff's schedule.
func WithBackoff(newBackoff func() backoff.BackOff) Option {
	return func(c *config) {
		if newBackoff == nil {
			newBackoff = DefaultBackoff
		}
		c.newBackoff = newBackoff
	}
}

// WithMaxRetryAfter caps the wait taken from a Retry-After header (on 409,
// 429 and 503). d <= 0 restores the default of 30s.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = DefaultMaxRetryAfter
		}
		c.maxRetryAfter = d
	}
}

// WithAttemptTimeout bounds each attempt, up to the response headers and
// its body. An attempt that times out is retried like any transport error;
// the request context still bounds the whole operation. 0, the default,
// means no per-attempt limit.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			d = 0
		}
		c.attemptTimeout = d
	}
}

// WithMaxBufferedBody sets how much of a request body without GetBody is
// buffered to be replayed. A larger body is streamed once and the operation
// is not retried. n <= 0 means never buffer: such bodies are not retried.
// The default is 1 MiB. Bodies with GetBody (as set by http.NewRequest for
// bytes, strings and bytes.Buffer readers) are never buffered.
func WithMaxBufferedBody(n int64) Option {
	return func(c *config) {
		if n < 0 {
			n = 0
		}
		c.maxBufferedBody = n
	}
}

// WithMaxErrorBody sets how many bytes of an error response [Client.Do]
// keeps in [APIError.Body]. n <= 0 restores the default of 64 KiB.
func WithMaxErrorBody(n int64) Option {
	return func(c *config) {
		if n <= 0 {
			n = DefaultMaxErrorBody
		}
		c.maxErrorBody = n
	}
}

// WithKeyMethods sets the methods that get a generated key when the request
// brings none; the default is POST and PATCH. With no methods, no key is
// ever generated (keys from the request or [WithKey] are still sent).
// Whatever the set, a request with a method other than GET, HEAD, OPTIONS,
// TRACE, PUT and DELETE that has no key is never retried.
func WithKeyMethods(methods ...string) Option {
	m := append([]string(nil), methods...)
	return func(c *config) { c.keyMethods = m }
}

// WithStructuredKey makes the Transport send generated keys and keys from
// [WithKey] as RFC 9651 sf-strings ("..."); by default they are sent raw,
// except a key with a double quote or a comma, which is always quoted (see
// [FormatKey]). A key already in the request header is always sent
// unchanged.
func WithStructuredKey(on bool) Option {
	return func(c *config) { c.structuredKey = on }
}

// WithClassifier installs a classifier consulted after the built-in rules;
// see [Classifier]. nil keeps the built-in rules alone.
func WithClassifier(cl Classifier) Option {
	return func(c *config) { c.classifier = cl }
}

// WithRetryBudget sets the per-Transport retry budget: a bucket of capacity
// tokens, full at start; a retry costs cost tokens (twice that after a
// transport error or timeout); an operation that ends with an answer the
// rules do not retry (a 2xx or 3xx, but also a final 4xx such as 404 or
// 422, which shows the server is up) returns 1 token if it took no retry,
// else what its retries cost. A retry that the bucket cannot pay is not
// made and the last outcome is returned with [ReasonBudgetExhausted].
// capacity <= 0 disables the budget; cost < 1 is taken as 1. Default: 500
// tokens, cost 5.
func WithRetryBudget(capacity, cost int) Option {
	return func(c *config) { c.budgetCapacity, c.budgetCost = capacity, cost }
}

// WithLogger sets the logger for attempts and decisions: retries at Info,
// operations that end without success after a retryable outcome at Warn
// (their last attempt, or, when the context ends while the operation
// waits to retry, a line saying so), everything else at Debug. A line
// names the request by method, host and path, never by its query, body
// or headers. nil, the default, logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithHook adds a hook: a function called synchronously once per attempt,
// after the decision and before any wait. Hooks compose: given several
// times, WithHook adds each hook, and every hook runs, in the order the
// options were given, so that instrumentation and the caller's own hook
// can coexist. A hook must be safe for concurrent use and should return
// quickly. nil adds nothing; by default there is no hook.
func WithHook(h func(Attempt)) Option {
	return func(c *config) { c.hooks.Add(h) }
}

// WithBase sets the RoundTripper that carries the attempts of the Transport
// built by [NewClient]. nil, the default, means http.DefaultTransport
// (or the Transport of [WithHTTPClient]'s client when that is set).
// [NewTransport] takes its base as an argument and ignores this option.
func WithBase(rt http.RoundTripper) Option {
	return func(c *config) { c.base = rt }
}

// WithHTTPClient makes [NewClient] start from a shallow copy of hc (its
// Timeout, Jar and CheckRedirect are kept) whose Transport is wrapped by a
// saferetry Transport. hc itself is not modified. nil, the default, means a
// zero http.Client.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) { c.httpClient = hc }
}

// withClock replaces the clock and timers, for tests.
func withClock(cl clock.Clock) Option {
	return func(c *config) { c.clock = cl }
}
