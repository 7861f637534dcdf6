// Package saferetryablehttp gives a go-retryablehttp client
// (github.com/hashicorp/go-retryablehttp) saferetry's idempotency keys and
// retry rules, in one call of [Configure]; use it where code already
// depends on retryablehttp. New code is better served by saferetry's own
// Transport or Client, which key, classify and wait the same way without
// retryablehttp's limits (see Configure).
//
// The retry decision after each attempt is the one the saferetry Transport
// makes (classification, the no-key veto, the attempt count, the deadline,
// Retry-After and the retry budget are written once, for both), with
// retryablehttp's own backoff bounds, logger, hooks and timeout in place of
// the Transport's. As with the Transport, an attempt is one round trip of
// the client's HTTPClient: net/http's own sends of an attempt again (see
// package saferetry) are not counted in RetryMax, nor paid from the
// budget.
//
// The package is not named retryablehttp so that a file can import it next
// to hashicorp's package, as every caller does, without renaming either.
package saferetryablehttp
