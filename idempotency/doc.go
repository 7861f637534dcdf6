// Package idempotency is server middleware that makes state-changing HTTP
// requests safe to retry: a request carrying an Idempotency-Key runs its
// handler once per (scope, key), however many times and to however many
// instances of the application it is delivered, and every repeat gets the
// first outcome back byte for byte. Once, that is, while the instance that
// runs it lives and reaches the store: in lease mode, one that dies or
// freezes before it records the outcome holds the key for its lease, and
// then a retry takes the key over and runs the handler again (see "Lease
// and TTL"). Side effects happen once all the same when the handler keys
// them with DerivedKey, or writes them in transactional mode
// (pgstore.NewTx), where they commit with the claim and the stored answer
// or not at all. It follows the IETF draft "The Idempotency-Key HTTP
// Header Field" and stays compatible with Stripe-style APIs.
//
// Wrap a handler with Middleware and a Store every instance reaches:
//
//	store := memstore.New() // or redisstore / pgstore for several instances
//	defer store.Close()
//	h := idempotency.Middleware(store,
//		idempotency.WithScope(func(r *http.Request) (string, error) {
//			return principal(r) // the authenticated tenant or user
//		}),
//	)(mux)
//
// # What the Middleware does
//
// Requests with a protected method (POST and PATCH by default, see
// WithMethods) are handled as below; all others pass through untouched.
//
//	situation                                      answer                               handler runs?
//	no key, key required (WithKeyRequired)         400 ProblemMissingKey                no
//	no key, key optional (the default)             passes through unprotected           yes
//	malformed key                                  400 ProblemMalformedKey              no
//	body over WithMaxRequestBody                   413 ProblemRequestTooLarge           no
//	body unreadable (client went away)             400 ProblemBodyUnreadable            no
//	body still arriving at the read deadline       408 ProblemRequestTimeout            no
//	scope function fails                           500 ProblemScopeUnavailable          no
//	new (scope, key)                               claim, run, store, answer            yes, once
//	same key and fingerprint, completed            stored answer + Idempotent-Replayed  no
//	same key and fingerprint, running              409 ProblemInProgress + Retry-After  no
//	claim answered with under half its lease left  409 ProblemInProgress + Retry-After  no
//	same key, other fingerprint                    422 ProblemKeyReused                 no
//	previous holder's lease lapsed                 takeover with a higher token         yes
//	completed, response not replayable             410 ProblemResponseTooLarge          no
//	store unreachable                              503 ProblemStoreUnavailable          no (fail closed)
//	transaction not committed (transactional mode) 503 ProblemCommitFailed              yes, unless committed
//
// # Keys and fingerprints
//
// The Idempotency-Key value is a raw token or an RFC 9651 sf-string; after
// unquoting it must be 1 to 255 bytes of printable ASCII, given once (see
// ParseKey). The saferetry client reads a value with the same grammar: the
// spaces and tabs around a value are not part of it, the characters of an
// sf-string are the key (spaces at its ends included), and RFC 9651
// parameters after an sf-string are ignored when well formed and refused
// when not. The fingerprint binds a key to one request: "v1:" and the
// SHA-256 of the method, the path, the query with parameters sorted, the
// body's media type (application/json names none), and the body,
// canonicalised when it is JSON, or the form a handler in front of the
// Middleware parsed from it (see Fingerprint). The version prefix lets a
// later recipe coexist with stored v1 entries without false matches.
//
// # Scope
//
// WithScope names who owns a key, typically the authenticated tenant or
// principal. The default scope is "" for every request: right for a
// single-tenant service, or when keys are UUIDv4s from trusted clients. The
// trade-off: with one shared scope, a client that learns or guesses another
// client's key can have that client's stored response replayed to it (and
// can block the other client's request with a 422). Multi-tenant services
// should scope by principal. A scope function's error fails the request
// closed (500), since running it under the wrong owner could leak or
// duplicate.
//
// # What is stored
//
// Outcomes with a status below 500, except 307, 308, 408 and 429, are
// stored for WithTTL (24 h by default): the status, the allow-listed
// headers and the body, byte for byte. A 5xx, 307, 308, 408 or 429, or a
// handler panic, stores nothing and releases the claim, so the retry runs
// the handler again (a panic goes on after the release, with the response
// headers as they were before the handler ran, for whatever answers in its
// place, such as a recovery handler around the Middleware). Such a panic,
// or a store's, goes on as it was, and so does a handler's
// runtime.Goexit: a panic that follows it while the Middleware cleans up
// (the store's Release or Rollback, the logger, a hook) is dropped, since
// the first tells what broke, and logged at the error level with the
// stack where it was raised (see WithLogger). A 307 or 308
// sends the request to another URI, where the client carries the key:
// stored, it made that request a reuse of the key with another payload
// (422). The handler must therefore not leave half-done side effects behind
// a 5xx; transactional mode guarantees that.
//
// Stores keep every byte: a header value with NUL or invalid UTF-8, a scope
// of any bytes and the body are replayed exactly as the handler wrote them
// (see the Store documentation). Only allow-listed headers are stored and
// replayed (and the coding of an encoded body, below): Content-Type,
// Location, ETag, Last-Modified, Link and Content-Location, plus those named
// with WithReplayHeaders, whatever the case of the name the handler put in
// the header map ("ETag", "location"; a replay carries it under its
// canonical name). Set-Cookie, Date, Retry-After, rate-limit headers,
// hop-by-hop headers and Content-Length never are (a replay carries the
// length of its stored body; to HEAD, the length its handler declared,
// which is kept for it, as a GET would get it). The first response keeps
// every header the handler set.
//
// Compression goes outside the Middleware (gzhttp.GzipHandler(mw(app))):
// the plain answer is stored, and each answer, first or replay, is encoded
// for the request it goes to. A body the handler encoded itself (compression
// inside, or pre-compressed content) is stored as the encoded bytes with its
// Content-Encoding and Vary, whatever the allow-list, and replayed as it is:
// a retry gets those bytes under the coding the first request negotiated,
// whatever its own Accept-Encoding, which is not part of the fingerprint.
//
// A response body larger than WithMaxResponseBody (1 MiB by default) is
// streamed to its client and recorded as completed but oversize: retries get
// 410 ProblemResponseTooLarge, never a second execution.
//
// While it holds a claim, the handler writes to a buffering ResponseWriter
// so that the outcome is stored before the client sees it (a retry arriving
// just after the answer then finds it). Through http.ResponseController that
// writer passes SetReadDeadline and SetWriteDeadline on to the connection
// (the answer is written after the handler returns, so a write deadline
// that passes first loses it for this client, not from the store). Flush,
// Hijack and EnableFullDuplex, which would send or read past the record,
// return an error matching http.ErrNotSupported, and the writer is no
// http.Flusher, http.Hijacker or http.Pusher. 1xx
// informational statuses are dropped, and, unlike net/http's writer, headers
// set after WriteHeader still go out (and are stored if allow-listed), since
// nothing was sent yet; Content-Length excepted. A Content-Length the
// handler declares holds its body as net/http's writer holds it: the one
// in the header when the status is set (at WriteHeader or the first Write)
// counts, and a Write that would go past it returns http.ErrContentLength
// and writes nothing, as does every later one, so that the body stored is
// what net/http would send. A body shorter than its Content-Length reaches the first client
// cut short, as net/http sends it, and so does a Content-Length field no
// client reads (several values that differ, a sign): that answer is
// recorded as completed but not replayable, and retries get 410
// ProblemResponseTooLarge, never a second execution nor a replay that
// passes off as good an answer its client never got whole. Trailers (declared in Trailer, or named with
// http.TrailerPrefix) go out after the body of the first answer, as
// net/http sends them; they are not stored, so a replay carries none.
// The handler's request body is the bytes the Middleware read, restored.
//
// # Lease and TTL
//
// The claim made before the handler runs carries two durations. The lease
// (WithLease, 10 s by default) is how long the claim survives without
// renewal; the Middleware renews it every third of a lease from the claim
// until the outcome is recorded (Complete or Release acknowledged), not
// only while the handler runs, so a long handler or a slow completion keeps
// its key, and a crashed instance blocks the key for one lease, not for the
// retention TTL. The TTL (WithTTL) is how long the entry, and then the
// stored outcome, is kept; after it the key is new again.
//
// The lease holds for store round trips up to a quarter of the lease (2.5 s
// at the default), whatever their cause: a renewal may take as long as the
// lease can have left, a renewal that fails is retried within what is left,
// and one that hangs gets a second one beside it. The Middleware counts the
// lease on its own monotonic clock from when it sent the claim or renewal
// that the store granted, which is never later than the store's own count
// as long as the two clocks run at the same pace (see below), and acts on
// that reckoning:
//
//   - A claim whose answer arrives with less than half of its lease left
//     (the store was slow, or said so through ClaimResult.LeaseRemaining)
//     does not start the handler: the request gets 409 as for a key in
//     progress, and the key is free again when that lease lapses.
//   - When a renewal finds the fencing token superseded, or no renewal was
//     acknowledged before the lease could lapse (the store is unreachable,
//     the process was paused), another instance may take the key over, so
//     the handler's request context is cancelled with a cause matching
//     ErrLeaseLost (read it with context.Cause). A handler that stops on its
//     context, and fences its own writes with TokenFromContext, then writes
//     nothing over a newer holder's: a fenced write after the newer holder's
//     is refused. What it wrote before stays until the newer run writes the
//     same rows, so a run must write what it owns in full, not add to it;
//     effects outside such writes are keyed by DerivedKey. A lost lease is reported as OutcomeLeaseLost. A
//     handler so cancelled that returns without writing anything is taken
//     to have stopped: nothing is stored, the claim is released, and its
//     client gets 503 ProblemStoreUnavailable with Retry-After, so that a
//     retry runs it again (net/http's implicit 200 would otherwise be
//     stored and replayed as a success that never happened). In
//     transactional mode the same holds whatever ended the context (the
//     client gone too), since the rollback undoes the handler's writes.
//     In lease mode a handler whose client left and that returns without
//     writing is stored as the implicit 200, since it may have done its
//     work: a handler that stops on its context should write an error
//     status (a 5xx is not stored).
//   - Complete and Release are retried on transient store errors within the
//     store timeout (5 s), with the token check kept, so that a short outage
//     after the handler ran does not leave the key in progress until its
//     lease lapses, when a retry would run the handler again. A response the
//     store cannot keep (ErrResponseNotStorable) is recorded as completed
//     but not replayable: retries get 410, never a second execution.
//
// The store counts leases and TTLs on its own clock (Redis's, the
// database server's; memstore's is the process's), the Middleware on its
// host's monotonic clock. Anything that moves the store's clock ahead of
// the Middleware's shortens every lease in flight by that much: a step of
// the store host's wall clock, a failover to a replica whose clock is
// ahead, a suspend of the Middleware's host (CLOCK_MONOTONIC, which Go's
// monotonic clock reads, does not count time suspended). A jump of more
// than two thirds of a lease while a handler runs can let a duplicate take
// the key over before the holder learns that its lease is gone (at its
// next renewal, within a third of a lease); the fencing token still keeps
// the older holder's outcome out of the record. Keep the clocks of the store's hosts synchronised by
// slewing (NTP or chrony without steps after boot), and give leases a
// margin over the largest jump the deployment can see. A forward jump also
// shortens the TTL of stored outcomes by as much. Transactional mode does
// not depend on clocks for exclusion: the claim is a row lock.
//
// Each claim gets a fencing token, greater on every takeover. Completion,
// renewal and release compare it, so an instance that lost its lease (a GC
// pause, a partition) cannot overwrite or delete the newer holder's claim or
// record: its outcome is not stored, and the loss is logged and reported as
// OutcomeLeaseLost. Its client gets the same answers as every repeat of the
// key, never one of its own: a storable response not yet sent is replaced
// by 409 in progress (Retry-After 1 s), and the retry replays the newer
// holder's outcome. A response that was already streaming (larger than
// WithMaxResponseBody) or is not stored (5xx, 307, 308, 408, 429) is sent as it is.
// Handlers can read the token with TokenFromContext and pass it on to make
// their own downstream writes fenced.
//
// A lease protects the key, not side effects outside the store: an instance
// that runs a payment and dies before its Complete reaches the store leaves
// the key in progress, and after the lease a retry runs the handler again.
// Transactional mode (below) makes the handler's database writes part of
// the claim; for anything else, key the side effect itself, so that a
// second run finds the first run's effect.
//
// # When to come back: Retry-After of 409
//
// A 409 ProblemInProgress carries a Retry-After of how long the route's
// work takes, not of when the holder would be presumed dead: the
// Middleware keeps, per route (the method and the ServeMux pattern the
// request matched, or its path when the Middleware wraps the mux), a
// moving estimate of how long its handler takes on this instance to answer
// 2xx, the claim's round trip included, and answers that, rounded up to
// whole seconds, at least 1 s and at most the holder's remaining lease.
// The holder's own start is not known to other instances, so this is when
// a holder that just started will likely be done, an upper estimate for
// one that started earlier. Until a run of the route was seen it answers
// 1 s. A client that comes back then finds the stored answer, or another
// 409 with the estimate again. Runs cut short (a lost lease, a client
// gone) and answers other than 2xx are not taken in; paths of more than
// 128 bytes, and routes beyond the first 1024, share one estimate, so wrap
// routes with identifiers in their paths one by one, or behind a ServeMux
// pattern, to keep them apart.
//
// # Waiting for the first request
//
// WithWaitForResult makes a duplicate wait for the running request instead
// of answering 409 at once, and answer with its replay. At most
// WithMaxWaiters (100) requests of one Middleware wait at once; the others
// get 409 at once. Stores that implement Watcher (memstore, redisstore
// with pub/sub, pgstore with LISTEN/NOTIFY) wake waiters when the entry
// settles, with a slow poll as a fallback; other stores are polled.
//
// # Store failures: fail closed
//
// When the store cannot claim, the request is answered 503
// ProblemStoreUnavailable with Retry-After and the handler does not run: a
// store outage must not turn into duplicate debits. WithFailOpen(true) runs
// the handler unprotected instead. When storing the outcome still fails
// after its retries, the response is sent all the same (the work happened);
// the failure is logged and reported as OutcomeStoreError, and a retry may
// find the key in progress until the lease lapses, then run again.
//
// # Transactional mode
//
// When the Store also implements TxStore (pgstore does), each protected
// request runs in one database transaction: BeginTx, claim inside it, the
// handler runs with the transaction in its request context (the store
// package provides the accessor, such as pgstore.TxFromContext) so its own
// writes join it, the response is buffered in full, and a storable outcome
// is stored and committed before any byte of the response is sent. A
// non-storable status or a panic rolls everything back; a failed commit rolls
// back and answers 503 ProblemCommitFailed, so the client never sees a
// success that was not kept. A response the store cannot keep
// (ErrResponseNotStorable from Tx.Complete) is stored as not replayable in
// the same transaction and committed with the handler's writes: retries
// get 410, as in lease mode. No lease is used: a crashed instance's
// transaction aborts and frees the key.
//
// # Problems
//
// Errors are RFC 9457 application/problem+json documents with a stable
// "type" URI; the ProblemXxx constants document each one, and each URI
// resolves to its constant's documentation:
//
//	type                     status  meaning                                         retry?
//	ProblemMissingKey        400     required key absent                             no, add a key
//	ProblemMalformedKey      400     key unparsable                                  no
//	ProblemBodyUnreadable    400     request body could not be read                  no
//	ProblemRequestTimeout    408     request body did not arrive in time             yes, same key and body
//	ProblemRequestTooLarge   413     request body over the limit                     no
//	ProblemKeyReused         422     key used with another fingerprint               never with this key
//	ProblemInProgress        409     first request still running                     yes, after Retry-After
//	ProblemResponseTooLarge  410     completed, answer too large or not sent whole   no, it happened
//	ProblemScopeUnavailable  500     scope function failed                           server fix needed
//	ProblemStoreUnavailable  503     store unreachable, nothing ran                  yes, same key
//	ProblemCommitFailed      503     commit failed or not confirmed                  yes, same key
//
// # OpenAPI
//
// OpenAPI describes a Middleware, from the options it is given, as a
// fragment of an OpenAPI 3.1 document, so that an API's own description
// says which operations take an Idempotency-Key and what their clients may
// rely on. The fragment's components are named after the contract, so that
// they do not collide with a spec's own:
//
//	parameters  IdempotencyKey           the header, its grammar as a pattern (the parser's, to the byte), required or not
//	headers     IdempotentReplayed       "true" on a replay; IdempotencyRetryAfter, whole seconds, on 409 and 503
//	schemas     IdempotencyProblem       the RFC 9457 document; IdempotencyProblemXxx per type URI (const type and status)
//	responses   IdempotencyBadRequest    400; IdempotencyRequestTimeout 408, IdempotencyInProgress 409,
//	            IdempotencyResponseTooLarge 410, IdempotencyRequestTooLarge 413, IdempotencyKeyReused 422,
//	            IdempotencyUnavailable 503, and IdempotencyScopeUnavailable 500 with WithScope
//	x-idempotency                        the policy, below
//
// Marshalled, an OpenAPIFragment is a complete document of components only;
// the file openapi.json in this package's directory is that of the default
// options, kept equal to OpenAPI() by a test. To merge it by hand, copy its
// components into yours and give each protected operation:
//
//	"parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
//	"responses": {
//	  "201": {"description": "...", "headers": {"Idempotent-Replayed": {"$ref": "#/components/headers/IdempotentReplayed"}}, ...},
//	  "400": {"$ref": "#/components/responses/IdempotencyBadRequest"},
//	  "408": {"$ref": "#/components/responses/IdempotencyRequestTimeout"},
//	  "409": {"$ref": "#/components/responses/IdempotencyInProgress"},
//	  "410": ..., "413": ..., "422": ..., "503": ...
//	},
//	"x-idempotency": { ...the components' x-idempotency, or this operation's own... }
//
// In Go, OpenAPIFragment.Components, Operation, ReplayedHeader and
// ProblemSchemas give the same pieces; package mockserver builds its
// description (served at /openapi.json) that way. An operation with
// answers of its own of a status the Middleware uses too (its own 400s)
// lists ProblemSchemas of that status in an anyOf beside its own schemas.
//
// The x-idempotency extension (OpenAPIPolicy, version 1) is defined here.
// On an operation it says that the operation takes the key, and how it
// treats it; under components it is the API's default policy. Its members:
//
//	version           1
//	header            "Idempotency-Key"
//	methods           the methods the Middleware protects (WithMethods), sorted
//	keyRequired       true: a request without a key gets 400; false: it runs unprotected (WithKeyRequired)
//	maxKeyLength      255: bytes of the key after unquoting
//	ttlSeconds        how long a key and its stored answer are kept; after it the key is new (WithTTL)
//	scope.by          who owns a key: "global" (one scope for every caller), "principal" (each
//	                  authenticated caller has its own keys), "custom" (WithScope, not described), or
//	                  the server's own word; scope.perRoute false: the route is in the fingerprint, so a
//	                  key sent to another route is a mismatch (422); scope.description optional prose
//	fingerprint       version "v1", covers ["method","path","query","mediaType","body"], jsonBody "canonical"
//	                  (sorted members, no insignificant space), maxBodyBytes (larger: 413)
//	replay            header "Idempotent-Replayed"; storedBelow 500 and notStored [307, 308, 408, 429]: the statuses
//	                  stored and replayed (any other stores nothing, and a retry runs again); headers, the
//	                  replayed response headers; maxBodyBytes, the largest stored answer, above which
//	                  retries get oversizeStatus 410
//	conflict          inProgressStatus 409 with retryAfter true; waitSeconds, how long a duplicate
//	                  first waits for the running request's answer (WithWaitForResult); mismatchStatus 422
//	storeFailure      "closed" (503, nothing runs) or "open" (WithFailOpen: runs unprotected)
//
// # echo
//
// echo renders an error returned by a handler only after the whole
// middleware chain has returned, so a Middleware wrapped with
// echo.WrapMiddleware records what the handler wrote before returning,
// nothing: an empty 200, replayed for the TTL where a 500 should have let a
// retry run again. Render the error inside the wrapped Middleware, with an
// echo middleware given to Use after it:
//
//	e.Use(echo.WrapMiddleware(idempotency.Middleware(store)),
//		func(next echo.HandlerFunc) echo.HandlerFunc {
//			return func(c echo.Context) error {
//				if err := next(c); err != nil {
//					c.Error(err) // echo's HTTPErrorHandler writes it now
//				}
//				return nil // already rendered
//			}
//		})
//
// The Middleware then records the rendered answer: a 5xx releases the key
// for a retry, a 4xx is stored and replayed. Middleware placed before the
// wrapped one no longer receives the error; log it in HTTPErrorHandler.
// Route-level middleware works the same way: e.POST(path, h,
// echo.WrapMiddleware(mw), renderErrors).
//
// # Observability
//
// WithLogger takes a *slog.Logger for the unusual (lost leases, store
// failures, takeovers); WithHook receives an Event with an Outcome for every
// protected request, for metrics.
package idempotency
