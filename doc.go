// Package saferetry retries HTTP requests without doing anything twice.
//
// The [Transport] is an [http.RoundTripper] that gives every POST and PATCH
// one Idempotency-Key per logical operation, replays the byte-identical key
// and body on each attempt, retries only outcomes that are safe to retry,
// waits with jittered exponential backoff (honouring a capped Retry-After),
// never waits past the context deadline, and spends retries from a budget so
// that an outage does not turn into a retry storm. A failure after which the
// server may or may not have acted is reported as [ErrOutcomeUnknown].
// A response whose body breaks off (the connection lost after its
// header: a read of the body fails, or [APIError.BodyErr] is set) still
// tells by its status how the operation ended; for the whole answer, ask
// again under its key ([KeyFromResponse], then [WithKey]) to get the
// server's stored answer replayed, never under a new key, which could
// repeat a success.
//
// The [Client] wraps an [http.Client] built on the Transport and turns every
// final status of 400 or above into an [*APIError]. Package
// github.com/saferetry/saferetry/saferetryablehttp gives an existing
// go-retryablehttp client the same key and retry rules.
//
// Keys are read with one grammar on both sides of the wire, the
// idempotency package's servers and this client (see [ParseKey]): a raw
// token, or an RFC 9651 sf-string whose characters, spaces at its ends
// included, are the key; spaces and tabs around the value are not part of
// it, and RFC 9651 parameters after an sf-string are ignored when well
// formed and refused when not.
//
// Retried: transport errors (but not a bad URL, a server certificate that
// does not verify, or a TLS alert by which the server refuses the client's
// configuration: no common version or cipher suite, a client certificate
// missing or refused), per-attempt timeouts, 408, 409, 429 and 5xx
// except 501, unless the answer is a replay (Idempotent-Replayed: true), which
// is the operation's recorded outcome and final whatever its status. A
// Stripe-Should-Retry header of "true" or "false" overrides the status rule
// ([ReasonServerSaid]), except for 400 and 422, which are final always.
//
// An attempt is one round trip of the base RoundTripper, and the attempt
// count, the retry budget, the hooks and the logger see attempts alone:
// net/http's Transport may send an attempt more than once by itself, on
// another connection, with the same key and body, and none of them counts
// those sends. It does so only for a request with no body or with a
// GetBody (the Transport gives a buffered body one), but for the first
// HTTP/2 case below. Over HTTP/1: when a reused connection fails before
// any of the answer arrives, if nothing of the request was written, or if
// the request is one it may replay (GET, HEAD, OPTIONS, TRACE, or one
// carrying an Idempotency-Key or X-Idempotency-Key). Over HTTP/2,
// whatever the method: when the connection it picked can take no new
// stream (it closed, or got a GOAWAY, before the request began: a body
// not yet read is sent as it is), when the server's GOAWAY shows that it
// never received the request (unless the GOAWAY carries an error and the
// request was its connection's first), or it refused the stream
// (REFUSED_STREAM) or reset it with PROTOCOL_ERROR; up to 7 sends more,
// the first at once, the next after 1s, 2s, 4s, and so on up to 32s (each
// up to 10% longer), waits that the retry decision does not see and that
// only the request's context, or the per-attempt timeout (see
// [WithAttemptTimeout]), cuts short.
//
// Defaults (each changeable by an [Option]):
//
//   - attempts: 4 in total (the first included), see [WithMaxAttempts];
//   - backoff: exponential, 250ms initial interval, multiplier 2, ±50%
//     jitter, 10s maximum interval (before the jitter: a wait is at most
//     15s), no elapsed-time limit (the attempt count and the context bound
//     the whole), see [WithBackoff] and [DefaultBackoff];
//   - Retry-After on 409, 429 and 503: honoured, capped at 30s, with up to
//     10% added jitter (never past the cap), see [WithMaxRetryAfter]; it
//     lengthens the backoff's wait, never shortens it (a Retry-After of 0
//     or a date already past leaves the backoff's wait as it is);
//   - retry budget: 500 tokens per Transport, a retry costs 5 tokens (10
//     after a transport error or timeout); an operation that ends with an
//     answer the rules do not retry (a success, but also a final 4xx such
//     as 404 or 422: the server is up) returns 1 token if it took no retry,
//     else what its retries spent; see [WithRetryBudget];
//   - request body without GetBody: buffered up to 1 MiB to be replayable; a
//     larger body is sent once and not retried, see [WithMaxBufferedBody];
//   - keys: random UUIDv4 for POST and PATCH, sent raw, see [WithKeyMethods]
//     and [WithStructuredKey];
//   - no per-attempt timeout, see [WithAttemptTimeout];
//   - no hooks, no logging: see [WithHook] (hooks add up, each runs) and
//     [WithLogger];
//   - [Client] error bodies: up to 64 KiB kept in [APIError.Body].
package saferetry
