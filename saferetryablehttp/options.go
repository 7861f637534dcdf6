package saferetryablehttp

import (
	"net/http"
	"time"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// Option configures [Configure]. Every option applies; the zero Option
// (nil) is ignored. Options are applied in order, a later one overriding an
// earlier one of the same kind. An Option is a plain function: one may be
// given to several Configure calls, from any goroutine.
type Option func(*config)

// config is the resolved set of options; it is read-only once built.
type config struct {
	maxAttempts    int // 0: not set
	keyMethods     retrypolicy.Methods
	structuredKey  bool
	classifier     saferetry.Classifier
	budgetCapacity int
	budgetCost     int
	maxRetryAfter  time.Duration
	crossOrigin    bool
}

func newConfig(opts []Option) *config {
	c := &config{
		keyMethods:     []string{http.MethodPost, http.MethodPatch},
		budgetCapacity: saferetry.DefaultBudgetCapacity,
		budgetCost:     saferetry.DefaultBudgetRetryCost,
		maxRetryAfter:  saferetry.DefaultMaxRetryAfter,
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// WithMaxAttempts sets the number of attempts per logical request, the
// first included, by setting the client's RetryMax to n-1; 1 disables
// retries, n < 1 is taken as 1. Without it, [Configure] keeps a RetryMax
// you chose, but takes retryablehttp.NewClient's default of 4 (5 attempts)
// for saferetry's default of 4 attempts (RetryMax 3), as it cannot tell
// that value from one you set: use WithMaxAttempts(5) for five.
func WithMaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts = max(n, 1) }
}

// WithKeyMethods sets the methods whose requests get a generated key when
// they bring none (from the header or [saferetry.WithKey]); the default is
// POST and PATCH. With no methods, no key is ever generated. Whatever the
// set, a request with a method other than GET, HEAD, OPTIONS, TRACE, PUT
// and DELETE that has no key is never retried.
func WithKeyMethods(methods ...string) Option {
	m := append([]string(nil), methods...)
	return func(c *config) { c.keyMethods = m }
}

// WithStructuredKey makes generated keys and keys from [saferetry.WithKey]
// go out as RFC 9651 sf-strings ("..."); by default they are sent raw, as
// [saferetry.FormatKey] encodes them. A key already in the request header
// is sent unchanged.
func WithStructuredKey(on bool) Option {
	return func(c *config) { c.structuredKey = on }
}

// WithClassifier installs a classifier that CheckRetry consults after the
// built-in rules, as the Transport does (see [saferetry.Classifier]); it
// gets the attempt's request, and the error as retryablehttp reports it.
// nil keeps the built-in rules alone.
func WithClassifier(cl saferetry.Classifier) Option {
	return func(c *config) { c.classifier = cl }
}

// WithRetryBudget sets the retry budget that the configured client's
// requests share, counted as [saferetry.WithRetryBudget] describes:
// capacity tokens, a retry costs cost (twice that after a transport error
// or timeout), an answer that is not retried refills it. capacity <= 0
// disables the budget; cost < 1 is taken as 1. Default: 500 tokens, cost 5.
func WithRetryBudget(capacity, cost int) Option {
	return func(c *config) { c.budgetCapacity, c.budgetCost = capacity, cost }
}

// WithMaxRetryAfter caps the wait that the client's Backoff takes from a
// Retry-After header (on 409, 429 and 503), as [saferetry.WithMaxRetryAfter]
// does for the Transport. d <= 0 restores the default of 30s.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = saferetry.DefaultMaxRetryAfter
		}
		c.maxRetryAfter = d
	}
}

// WithCrossOriginRedirects lets a request's body and key follow a redirect
// to another origin (scheme, host or port) than the first request's, as
// [saferetry.WithCrossOriginRedirects] does for the Transport. By default
// such a hop is not sent when it has a body or a keyed method, and fails
// with [saferetry.ErrCrossOriginRedirect] (not retried); any other hop
// (the GET after a 303) is sent without the key.
func WithCrossOriginRedirects(allow bool) Option {
	return func(c *config) { c.crossOrigin = allow }
}
