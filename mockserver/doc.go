// Package mockserver is a payments API that implements the safe-retry
// contract, with the faults that break naive clients available on demand and
// counters that show whether an operation ran once. It is to idempotent HTTP
// clients what net/http/httptest is to handlers: start one in a test, point
// the client at URL, inject a fault, and assert from the server's own records
// that every payment executed exactly once.
//
//	srv := mockserver.New()
//	defer srv.Close()
//	srv.DropAfterCommitNext(1) // the classic timeout after commit
//	// ... make a payment with your client, key k ...
//	if srv.Executions(k) != 1 { t.Fatal("not exactly once") }
//
// The cmd/mockserver binary serves the same API on a fixed address for
// clients written in any language.
//
// # Payments API
//
//   - POST /payments with a JSON body {"amount": 1250, "currency": "EUR",
//     "recipient": "alice"} executes a payment: amount is an integer > 0 in
//     minor units, at most 2^63-1 and written without a fraction or an
//     exponent (not 1250.0 or 1.25e3), currency three letters (normalised to upper case),
//     recipient a non-blank string without U+0000 (which PostgreSQL's
//     text cannot hold: refused alike over every ledger); each of them
//     given once (one given twice is refused, whatever its values: JSON
//     parsers differ on which they take, encoding/json the last, others
//     the first); other members are ignored, but refused alike when given
//     more than once (the members of nested values are not checked). Member
//     names are case-sensitive, and one that is amount, currency or
//     recipient in another case ("Amount", with "amount" given too or
//     not) is refused, naming it and the member it looks like: a decoder
//     that ignores case (encoding/json into a struct, .NET's by default)
//     takes it for that member, folding names as encoding/json does (the
//     Kelvin sign K is a "k", the long s ſ an "s"). An
//     Idempotency-Key is required. It answers 201 with the Payment (its "id"
//     is new on every execution) and a Location header, 400
//     (ProblemValidation, listing every bad field) for an invalid body, or
//     402 (ProblemInsufficientFunds) when the balance of the currency is too
//     low. Validation errors are 400, not 422: in the contract 422 means "key
//     reused with another payload", which a client must never retry. The
//     body must be JSON in UTF-8: declared as application/json (in any
//     case, charset=utf-8 or no charset) or an application/*+json type
//     (application/vnd.api+json; not the range application/*+json itself,
//     nor application/+json), or
//     not declared at all; any other Content-Type (a form, text/plain,
//     another charset) is answered 415 (ProblemUnsupportedMediaType, with
//     Accept: application/json), and so is a body with a content coding
//     (gzip; with Accept-Encoding: identity), before the key is claimed,
//     so that answer is neither stored nor replayed. Only a request with a
//     valid Idempotency-Key that the store holds no record of is refused
//     so: one without a key, or with a malformed one, gets the contract's
//     400, and a retry of a key that executed, or whose first request
//     runs, is answered from its record by the idempotency Middleware,
//     as any retry (the stored answer replayed when its fingerprint is
//     the first request's, 422 when not, 409 in progress with the
//     Middleware's Retry-After, or under idempotency.WithWaitForResult
//     the answer it waited for), but never takes the key's claim over
//     (when its lease lapsed), nor keeps a claim of it, so that a client
//     that takes 415 as final never takes a payment made for one not
//     made. (In transactional mode a claim in progress is a row not yet
//     committed: the lookup waits for it, once, up to the store's lock
//     timeout, and the Middleware answers from what it found, 409 or
//     the record.) A UTF-8 byte order
//     mark before the JSON is ignored, as in the admin API (RFC 8259,
//     section 8.1); a body that is not UTF-8 (a recipient in ISO-8859-1)
//     is refused with 400, not read with U+FFFD in place of its bad bytes.
//   - GET /payments answers the JSON array of every executed payment, oldest
//     first; GET /payments/{id} one payment.
//   - GET /balance answers {"balances": {"EUR": 998750, ...}} for the
//     currencies set or used so far; GET /balance?currency=EUR just one.
//     Every currency starts at DefaultBalance unless WithBalance says
//     otherwise.
//   - GET /openapi.json (OpenAPIPath) answers the server's own OpenAPI 3.1
//     description, also from Go as Server.OpenAPI: these endpoints with
//     their request and response schemas, and for POST /payments the
//     idempotency package's fragment (idempotency.OpenAPI): the
//     Idempotency-Key parameter, the 400, 408, 409, 410, 413, 422 and 503
//     problem responses with their type URIs (and the server's own 400,
//     402, 415 and 503), Retry-After,
//     Idempotent-Replayed, and the x-idempotency policy (the TTL and wait
//     given with WithIdempotencyOptions); and beside them the failures
//     that FailNext injects, of any status from 400 to 599 (the 4XX and
//     5XX ranges, and each documented status of POST /payments, whose
//     required headers an injected failure does not carry are optional
//     there). The admin API is not in it.
//
// POST /payments sits behind idempotency.Middleware: the same key and body
// replays the stored answer with Idempotent-Replayed: true, the same key with
// another body gets 422, a duplicate arriving while the first is running gets
// 409, and a missing key 400. Errors are application/problem+json: an
// unknown path is 404 (ProblemNotFound), a method the path does not allow
// 405 (ProblemMethodNotAllowed) with an Allow header that lists the methods
// it does allow (GET brings HEAD).
//
// A request must arrive, headers and body, within DefaultReadTimeout
// (WithReadTimeout), or its connection is closed (a POST /payments whose
// body is late is answered 408 idempotency.ProblemRequestTimeout first,
// which clients retry); injected latency and delays do not count against
// it. A keep-alive connection idle for DefaultIdleTimeout (WithIdleTimeout)
// is closed.
//
// # Faults
//
// From Go: FailNext, DropAfterCommitNext, DelayNext, SetLatency, ExpireKeys,
// ClearFaults. Faults are queues consumed by the next requests they apply
// to, shared by all clients of the server.
//
// # Inspection
//
// From Go: Executions, Attempts, Stats and Keys (per Idempotency-Key, with
// how each attempt was answered, when it arrived and how long its answer
// took), Payments, Balance, Faults, Store, Reset.
// Counters are updated before the answer's first byte is sent, so a client
// that got an answer finds its attempt counted. They are kept for at most
// MaxInspectedKeys keys: past that, the keys used least recently are
// forgotten, so that a long run does not grow the server without end.
//
// # Admin API
//
// The same over HTTP under AdminPrefix, JSON in and out. A count defaults to
// 1 and may take the pending faults of its kind up to MaxFaultCount;
// delay_ms and latency_ms go from 0 to 3600000 (one hour); status, when
// given, from 400 to 599; each is a JSON integer, written without a
// fraction or an exponent, and a 400 answer to one of another type or out
// of range says so in these words (a null is taken as the field left
// out: {"count":null} is a count of 1, {"delay_ms":null} is refused as
// missing). Each endpoint takes only the fields listed for
// it (expire-keys, reset and DELETE faults take none: an empty body or
// {}): unknown fields (a field of another endpoint too, or one named in
// another case: names are case-sensitive, unlike encoding/json's), a
// field given twice, out-of-range values, malformed JSON, anything after
// the JSON object and a body over 64 KiB are answered 400 with a problem of type ProblemBadAdminRequest,
// and change nothing. A UTF-8 byte order mark before the JSON is ignored
// (RFC 8259, section 8.1). Every fault endpoint answers the pending
// Faults. Each endpoint takes only the method listed; another is 405.
// An endpoint that reads or resets the ledger (keys, reset) answers 503
// with a ProblemLedgerUnavailable problem when the ledger cannot be
// reached, or has not answered within 5 seconds (as the payments API's
// reads do); a failed reset has reset everything else and may be
// repeated.
// Anyone who can reach the port can use the admin API: New listens on
// loopback only, and WithAdminAPI(false) turns the admin API off (every
// path under AdminPrefix is then a 404 problem).
//
//	POST   /_mock/fail               {"count": 2, "status": 503}  (status defaults to 503)
//	POST   /_mock/drop-after-commit  {"count": 1}
//	POST   /_mock/delay              {"count": 1, "delay_ms": 300}
//	PUT    /_mock/latency            {"latency_ms": 20}           (0 removes it)
//	GET    /_mock/faults             pending faults
//	DELETE /_mock/faults             clear pending faults and latency
//	POST   /_mock/expire-keys        every key seen so far expires now
//	POST   /_mock/reset              back to the initial state
//	GET    /_mock/keys               [KeyStats, ...] in the order first seen
//	GET    /_mock/keys/{key}         KeyStats of one key (zero counts if never seen)
//
// # Shared stores and ledgers
//
// By default each Server keeps its keys in its own memstore and its
// payments in a Ledger in its own memory. Servers given the same shared
// store with WithStore (and the same WithNamespace) act as instances of one
// service: a key executes once across all of them. Give them a shared
// ledger too (WithLedger: mockserver/redisledger, mockserver/pgledger), and
// every instance answers GET /payments, GET /balance and KeyStats.Payments
// from the same records, so the servers' own records are the proof of
// exactly-once, and a payment made by an instance that died is not lost.
// Attempts, Executions and History stay per server. ExpireKeys acts on one
// server's key scope only; call it on each of them. Reset resets a shared
// ledger for every server.
//
// # Keyed payments
//
// A payment is recorded under its request's idempotency.DerivedKey, the
// same on every execution of the operation. A re-run of the handler, after
// a takeover of a claim whose instance died or was paused past its lease,
// finds the earlier run's payment and answers with it: the same payment ID,
// the balance debited once. This is what keeps lease mode exactly-once for
// a side effect outside the idempotency store. The ledger keeps the ref
// for the idempotency TTL only, so that after it the key executes anew, a
// new payment, as the contract says (see Ledger.Pay). WithUnkeyedPayments
// turns it off, to show what a lease alone gives. With an idempotency.TxStore and a
// TxLedger (pgledger) the payment also commits in the claim's transaction.
package mockserver
