// Package conformance checks, from outside and over HTTP, whether an
// endpoint honours Idempotency-Key: whatever its language or framework, the
// same key and body must replay the first answer, another body with the
// same key must be refused, a burst of requests with one key must execute
// once, and so on. The saferetry command runs it (saferetry check); Go
// programs and tests call [Checker.Run] and read the [Report].
//
// # The checks
//
// Each check has a stable ID, a [Level] taken from the IETF draft "The
// Idempotency-Key HTTP Header Field" (ProfileIETF, the default) or from
// Stripe's convention (ProfileStripe), a [Status] and a one-line verdict,
// with the exchanges it rests on as evidence:
//
//	id                    ietf    stripe  what it asks
//	first-request         MUST    MUST    a request with a fresh key succeeds (2xx)
//	replay                MUST    MUST    the same key and body get the same status and body, byte for byte
//	replay-headers        MUST    MUST    ... and the first answer's Content-Type, Location, ETag, Last-Modified, Link and Content-Location (WARN: the same values written differently)
//	replay-marker         INFO    SHOULD  the replay says so (Idempotent-Replayed: true), and the first answer does not
//	reuse-refused         MUST    MUST    the same key with another body, or one as long as the first, is refused (4xx), and not as the other body alone is; the key and body at another path are not replayed
//	reuse-status          SHOULD  SHOULD  ... with 422 (ietf), or 400, 409 or 422 (stripe)
//	concurrent-once       MUST    MUST    a burst of requests with one fresh key (the first's in upper case) executes once: every success names one resource, or at most one is unmarked
//	concurrent-409        SHOULD  SHOULD  every other answer of the burst is 409 (in progress)
//	conflict-retry-after  SHOULD  INFO    every 409 carries a valid Retry-After
//	missing-key           SHOULD  SHOULD  with KeyRequired, a request without a key gets 400
//	malformed-key         SHOULD  INFO    a malformed key (an unterminated sf-string, an empty value, two values) gets 400
//	long-key              SHOULD  SHOULD  a key over 255 bytes gets 400
//	problem-json          SHOULD  INFO    those error answers are application/problem+json (RFC 9457)
//	count-once            MUST    MUST    with CountURL, the server's own records grow by one per operation
//	scope-isolation       MUST    MUST    with AuthA and AuthB, one principal's key is new to the other: run, not replayed or refused
//	ttl-expiry            SHOULD  SHOULD  with TTL, a key re-sent after the stated retention executes anew
//
// A replay answered 410 Gone fails replay as any other status does: the
// first answer is not replayed. The verdicts of replay and of the other
// checks that meet a 410 where a replay could come (replay-headers,
// reuse-status, concurrent-once, concurrent-409, scope-isolation,
// ttl-expiry) say what it means: the server recorded the first answer as
// completed but not replayable, usually as too large for its store, or as
// a body it refuses to keep (saferetry's Middleware does so past
// WithMaxResponseBody, and for a body shorter than its Content-Length,
// which never reached its client whole), so look at its limits on stored
// answers.
//
// count-once reads CountURL's count (see [Checker.CountURL]): a count of
// records can fail it; an answer that is not JSON, counted by its size in
// bytes, can only pass (every operation added as many bytes) or warn.
//
// reuse-refused sends the other body once more, with a key of its own,
// when the reused key was refused: if that gets the same 4xx, the body is
// invalid whatever its key (a strict server refuses the derived body's
// extra member), the refusal shows nothing about the key, and
// reuse-refused says WARN and reuse-status SKIP; give a valid
// [Target.OtherBody].
//
// When the reused key was refused, reuse-refused also sends the key with
// a body exactly as long as the first, derived from it: in JSON the first
// significant digit of the first number changed (1250 becomes 2250, a
// change a server that reads numbers as doubles sees too), else the last
// letter or digit of the first string value; in another body its last
// letter or digit, else its last byte. A server that binds a key to its
// body's length alone refuses any other body of another length and
// replays this one: replayed, run, or answered anything but a 4xx, it
// FAILs reuse-refused, whatever the other body showed. A refusal passes,
// the key's or one of a strict server that finds the derived body invalid
// (an unknown currency, say): the check cannot tell which, so a server
// that validates the changed value before its key is not caught. A JSON
// body without a number or a string with a letter or digit gets no such
// request.
//
// reuse-refused also sends the first request's key and body to a path of
// no endpoint, the URL's with a segment "saferetry-check-path-" and a UUID
// added (its query kept): a key binds its method and path as well as its
// body (CONTRACT.md: both are in the fingerprint). A server that keeps the
// contract refuses it (404 or 405 for the route, or 422 for the key; one
// whose keys are scoped to their endpoint may run it as a key of its
// own); a layer whose fingerprint leaves the path out, in front of its
// routes, answers it with the first request's replay (marked, or its
// status and bytes naming its resource and no other: the same bytes with
// a Location of their own are a run of their own), and FAILs
// reuse-refused: a client that uses one key for two endpoints (a payment
// and its refund, keyed by an order) gets the first's answer for the
// second, which never runs. A layer that runs after routing answers 404
// and is not caught. Whatever it got joins reuse-refused's verdict and
// evidence.
//
// scope-isolation sends principal a's key and body as principal b once
// a's request has been answered: b's answer must be a run of its own. A
// replay or a's resource shows keys shared between principals and is a
// FAIL. A refusal (a 4xx other than 408 and 429) is sent again as b with
// a key of its own: the same answer again shows that b could not run the
// operation whatever the key (a validation 422 of b's account, a 403 of
// its permissions: check AuthB) and is a WARN; a success shows that only
// a's key was refused (a 422 or Stripe's 400 for a key bound to another
// body, a 403 for a key "of another user"): the keys are shared, a FAIL.
// After a 409 or 422 (the key in progress or bound) any other answer is
// a FAIL too; after another refusal it is a WARN, as is a 408, 429 or
// 5xx.
//
// The draft makes the 400, 409 and 422 answers SHOULDs, and leaves expiry to
// the server's published policy, so those are SHOULDs here; what makes a key
// idempotent at all (one execution, the first answer replayed, another body
// not run, another principal's answer never served) is a MUST. A check that
// does not hold is FAIL whatever its level, except an INFO check, which
// says WARN; [Report.Passed] counts only the MUSTs. A check that cannot be
// run (its option is unset, or the first request failed) is SKIP.
//
// A success's resource identity is its Location header, else the "id"
// member of its JSON body, else the body itself: two successes name the
// same resource when both have a Location and it is the same, else when
// both have an id and it is the same, else when their bodies are equal;
// two Locations or ids that differ are two resources, however alike the
// bodies. Equal bodies that name no resource ({"status":"accepted"}) do not
// show one execution, so concurrent-once says WARN for a burst whose
// successes name none, unless the server marks its replays (replay-marker
// PASS) and at most one success is unmarked. Two unmarked successes that
// name no resource are a WARN too: they may be two executions, or one
// answer handed to requests that waited for it; a count (CountURL) tells.
// When replay passed, concurrent-409 holds a burst's successes to the
// operation's answer (the last one, asked for once the burst settled): a
// success with another status or other bytes that names no other resource
// (a 200 "processing" for a request that met the key in progress) is
// neither that answer nor 409, a FAIL; one that names another resource is
// another execution, for concurrent-once to report. A 409 marked
// Idempotent-Replayed: true is no 409 in progress either: a client takes
// a replayed 409 for the operation's final answer and stops retrying.
// The burst's key is the first request's in upper case: another key,
// since a key is compared byte for byte, but the first request's to a
// server that compares keys in any case (a key column under a
// case-insensitive collation, MySQL's default), which then runs an
// operation whose key differs from another's only in case not at all and
// answers it with the other's replay. When every request of the burst is
// answered, every success is the first request's answer (its status and
// bytes, and no other Location), and the server
// marks its replays but none of them is unmarked, no request of the burst
// ran: concurrent-once FAILs. A server that does not mark its replays and
// answers the burst with the first request's answer, naming its resource,
// gets a WARN: each run may name the same resource (an upsert). It passes
// when a request of the burst met the key in progress (a 409, which a key
// folded into the first request's, completed before the burst, never
// gets), or when CountURL grew during the burst by what the first request
// added: either shows the burst's key ran.
// The concurrent checks see a 409 only when the first request is still
// running as the others arrive, so conflict-retry-after is SKIP against an
// endpoint that answers faster than the burst arrives.
//
// # What it guarantees
//
// Every request carries a key of its own, fresh (a UUIDv4 inside) for this
// run (the burst's is the first's in upper case, another key): a key is
// sent twice only by the check that means to (the replay, the burst, the
// principals, the re-send after TTL), so running the checker
// twice, or against a live server, never replays or blocks another client's
// operation. It does execute the operation: once for the first request,
// once for the other body with a key of its own (when the reused key is
// refused), once for the burst, once or twice for scope-isolation and once for
// ttl-expiry against a server that keeps the contract, more against one
// that does not. Point it at a test account. Header values given in Header,
// AuthA and AuthB are sent but never appear in a Report. Redirects are not
// followed: the checks are about the endpoint's own answers.
//
// A PASS is what the answers showed, not a proof: a burst that found no
// race may have missed a narrow window, and without CountURL "executed
// once" is read from the answers alone. A FAIL is a counter-example, with
// the exchanges that show it.
package conformance
