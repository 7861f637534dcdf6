package saferetry

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// Attempt describes one attempt and what the Transport decided after it.
// It is passed by value to the hooks set by [WithHook]; a hook may keep it,
// but must not modify its Request. The zero Attempt describes nothing. An
// Attempt is not modified after the hook got it, so it may be read from
// several goroutines.
type Attempt struct {
	// Request is the request sent by this attempt (a clone of the caller's).
	Request *http.Request
	// Key is the operation's idempotency key; empty when it has none.
	Key string
	// Number counts attempts from 1.
	Number int
	// StatusCode is the response status, or 0 when the attempt got no
	// response.
	StatusCode int
	// Err is the attempt's error when it got no response.
	Err error
	// Decision is [DecisionRetry] or [DecisionReturn].
	Decision Decision
	// Reason explains the decision; for a retry, whether the status or
	// error was retryable or Retry-After was honoured ([ReasonRetryAfter]:
	// the wait is then the longer of the server's and the backoff's); for
	// a return, what stopped retries, which the operation's [*Error] and
	// [Client.Do]'s [*APIError] carry too, in their Reason.
	Reason Reason
	// RetryAfter is the server's Retry-After, before capping and jitter;
	// 0 when absent or not honoured.
	RetryAfter time.Duration
	// Wait is the wait chosen before the next attempt; 0 on a return.
	Wait time.Duration
	// Duration is the attempt's round trip, from sending it to its
	// response's header or its error; Elapsed is the operation's time from
	// its first attempt to the end of this one, waits included. Both are
	// read from the clock only when a hook or a logger is set (0
	// otherwise).
	Duration, Elapsed time.Duration
}

// observe hands an attempt to the hooks, in order, and to the logger.
func (c *config) observe(ctx context.Context, a *Attempt, retryableOutcome bool) {
	c.hooks.Call(a)
	if c.logger == nil {
		return
	}
	level := slog.LevelDebug
	switch {
	case a.Decision == DecisionRetry:
		level = slog.LevelInfo
	case retryableOutcome:
		level = slog.LevelWarn
	}
	if !c.logger.Enabled(ctx, level) {
		return
	}
	attrs := appendOperation(make([]slog.Attr, 0, 10), a.Request, a.Key)
	attrs = append(attrs, slog.Int("attempt", a.Number))
	if a.Err != nil {
		attrs = append(attrs, slog.String("error", a.Err.Error()))
	} else {
		attrs = append(attrs, slog.Int("status", a.StatusCode))
	}
	attrs = append(attrs, slog.String("decision", a.Decision.String()), slog.String("reason", string(a.Reason)))
	if a.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", a.RetryAfter))
	}
	if a.Decision == DecisionRetry {
		attrs = append(attrs, slog.Duration("wait", a.Wait))
	}
	c.logger.LogAttrs(ctx, level, "saferetry: attempt", attrs...)
}

// logInterrupted logs, at Warn, an operation whose context ended after its
// attempt n was to be retried, during the wait or at its end: the retry
// was logged, but not made. Nothing is logged for an operation whose
// context ended before its first attempt (n == 0).
func (c *config) logInterrupted(ctx context.Context, req *http.Request, key string, n int, err error) {
	if c.logger == nil || n == 0 || !c.logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	attrs := appendOperation(make([]slog.Attr, 0, 7), req, key)
	attrs = append(attrs, slog.Int("attempts", n), slog.String("error", err.Error()),
		slog.String("reason", string(ReasonContextDone)))
	c.logger.LogAttrs(ctx, slog.LevelWarn, "saferetry: interrupted before retrying", attrs...)
}

// appendOperation appends what every log line of an operation says: its
// method, host and path (never the query, the body or a header), and key.
func appendOperation(attrs []slog.Attr, req *http.Request, key string) []slog.Attr {
	return append(attrs,
		slog.String("method", req.Method),
		slog.String("host", req.URL.Host),
		slog.String("path", req.URL.Path),
		slog.String("key", key),
	)
}
