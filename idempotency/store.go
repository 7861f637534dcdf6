package idempotency

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrStaleToken is returned by Store.Renew, Store.Complete and Store.Release
// when the caller no longer holds the claim: its fencing token was superseded
// by a takeover, the claim was completed or released, or the entry expired.
// The store changes nothing when it returns ErrStaleToken. Match it with
// errors.Is.
var ErrStaleToken = errors.New("idempotency: claim is no longer held by this token")

// ErrResponseNotStorable is returned (wrapped) by Store.Complete and
// Tx.Complete when the store cannot keep this response (too large for it,
// or bytes it cannot represent) although it is reachable. The claim stays
// as it was. The Middleware then completes the claim as not replayable
// (Response.Oversize), in transactional mode in the same transaction, so
// that retries get a 410 problem instead of running the handler again.
// Match it with errors.Is.
var ErrResponseNotStorable = errors.New("idempotency: the store cannot keep this response")

// ErrRecordedNotReplayable is returned (wrapped) by Tx.Commit when the
// transaction was not committed as a whole, but part of the operation was
// committed some other way (in pgstore, a handler that committed the
// request's transaction itself), and the store recorded the key as
// completed but not replayable in its stead: retries get a 410 problem
// (ProblemResponseTooLarge) and the operation does not run again. The
// Middleware's 503 answer then says so, rather than that a retry is
// replayed or runs again. Match it with errors.Is.
var ErrRecordedNotReplayable = errors.New("idempotency: the operation was recorded as completed but not replayable")

// ErrClaimDeclined is returned (wrapped or not) by a Store's Claim, or a
// Tx's, that answered but claims k for no request of this kind: a Store
// wrapper that answers some requests from their key's entry without ever
// claiming the key (mockserver's does, for a body it refuses) found no
// entry to answer from. The Middleware then runs the handler without a
// claim (TokenFromContext reports none), whatever WithFailOpen says, and
// sends its answer as it is: nothing is stored, renewed, completed or
// released for it, and its event is OutcomeDeclined, with Token 0 and the
// status sent. The wrapper marks such a request, so that its handler
// answers it knowing that it is not protected. Match it with errors.Is.
var ErrClaimDeclined = errors.New("idempotency: the store declined to claim the key for this request")

// Key names one logical operation in a store: the scope that owns it and the
// client's Idempotency-Key value. Two keys with different scopes never share
// an entry. Key is comparable; stores may use it as a map key. The zero Key
// is the empty key in the default scope, which ParseKey never returns. Key
// is a plain value, safe to copy and to read from several goroutines.
type Key struct {
	// Scope is the owner of the key, as returned by the WithScope
	// function; "" (the default) is the single scope of a service that does
	// not set one.
	Scope string
	// Key is the Idempotency-Key value as ParseKey returns it: 1 to
	// MaxKeyLen bytes of printable ASCII.
	Key string
}

// State is the state of a store entry. The zero State is neither of the
// constants below: it is the State of the zero Entry (nothing found), and
// the Middleware answers a stored entry in it with 503. It is a plain value.
type State uint8

const (
	// StateInProgress is an entry whose claim is held: the handler may still
	// be running. Its lease tells whether the holder is alive.
	StateInProgress State = iota + 1
	// StateCompleted is an entry whose outcome is stored for replay.
	StateCompleted
)

// String returns "in_progress", "completed" or "unknown".
func (s State) String() string {
	switch s {
	case StateInProgress:
		return "in_progress"
	case StateCompleted:
		return "completed"
	}
	return "unknown"
}

// Response is a stored outcome: what a retry of the same operation receives.
// The zero Response is not a valid outcome (Status 0); stores keep what the
// Middleware gives them. A Response may be read from several goroutines as
// long as none modifies its Header or Body.
type Response struct {
	// Status is the HTTP status code the handler wrote.
	Status int
	// Header holds the allow-listed response headers only, and, when the
	// body is encoded, its Content-Encoding and Vary, and, in an answer to
	// HEAD, the Content-Length its handler declared. It may be nil. A
	// name may have no values (a handler's Content-Type set to nil, so that
	// net/http sniffs none): stores keep the name.
	Header http.Header
	// Body is the response body, byte for byte. It may be nil.
	Body []byte
	// Oversize reports that the handler completed but its response is not
	// replayable, so Header and Body were not kept: it was larger than the
	// storage cap, the store could not keep it (ErrResponseNotStorable),
	// or it did not reach its client whole (a body shorter than its
	// Content-Length). Retries are answered with a problem instead of
	// running the handler again.
	Oversize bool
}

// Entry is what a store holds for one Key. The zero Entry is what Get
// returns with found == false. Like Response, it may be read from several
// goroutines as long as none modifies it.
type Entry struct {
	// State is StateInProgress or StateCompleted.
	State State
	// Fingerprint is the fingerprint given to the Claim that created the
	// entry.
	Fingerprint string
	// Token is the fencing token of the newest claim on the entry.
	Token int64
	// LeaseRemaining is, for an entry in progress, how long until its lease
	// lapses by the store's clock; zero or negative when it has lapsed.
	// It is zero for a completed entry.
	LeaseRemaining time.Duration
	// Response is the stored outcome of a completed entry; nil otherwise.
	Response *Response
}

// ClaimResult is the answer of Store.Claim. The zero ClaimResult is not
// Acquired and carries the zero Entry; a store never returns it without an
// error. It is a plain value, like Entry: it may be read from several
// goroutines as long as none modifies it (its Entry's Response included).
type ClaimResult struct {
	// Acquired reports that the caller now holds the claim with Token and
	// must run the operation, then Complete or Release it.
	Acquired bool
	// Token is the fencing token of the claim when Acquired.
	Token int64
	// TookOver reports that the claim was acquired by taking over an entry in
	// progress whose lease had lapsed (its holder is presumed dead).
	TookOver bool
	// LeaseRemaining is, when Acquired, how much of the new claim's lease
	// was left by the store's clock when the store answered: the lease
	// itself for a store that answers at once, less when the store spent
	// time on the claim (waiting for a lock, say), negative when the lease
	// already lapsed. Zero means the store cannot tell; the Middleware then
	// counts the whole lease from when it sent the claim.
	LeaseRemaining time.Duration
	// Entry is, when not Acquired, the entry that stood in the way: a
	// completed entry, an entry in progress with a live lease, or an entry
	// (of any state) whose fingerprint differs from the one claimed.
	Entry Entry
}

// Store keeps idempotency entries where every instance of an application can
// reach them. The Middleware calls it; users pick an implementation
// (memstore, redisstore, pgstore) or write their own from this contract, and
// check it with storetest.Run.
//
// Time: lease and ttl are durations; the store adds them to its own clock
// (the Redis or database server's clock where there is one), so instances
// whose clocks disagree still agree on leases.
//
// Fencing tokens: every successful Claim returns a token greater than every
// token previously issued for that Key, also after the Key was released or
// expired: the holder of an expired claim may still be running, and its
// Complete or Release must find its token stale, not the next claim's. A
// store may draw tokens from a store-wide increasing source instead
// (storetest checks this). Renew, Complete and Release act only
// when the given token is the entry's current token and the entry is still in
// progress; otherwise they return ErrStaleToken and change nothing.
//
// Expiry: an entry is removed ttl after it was claimed or completed, whichever
// came last, but never while its holder keeps renewing: Renew keeps the entry
// at least until the end of the new lease. An expired entry is absent: Get reports found == false and Claim
// acquires it anew. Stores clean up expired entries without scanning every
// entry on a request path.
//
// Bytes: a store keeps scopes, fingerprints, header names and values, and
// bodies byte for byte, whatever bytes they hold (NUL, invalid UTF-8, 0xFF,
// separators such as ':' or '{'); keys are what ParseKey returns. Get and a
// refused Claim give back exactly the Response that Complete was given.
//
// Durations: a lease or ttl of zero or less is refused with an error and
// changes nothing. A store that counts time in a coarser unit than the
// nanosecond (a microsecond for redisstore and pgstore) may round a ttl up
// to its unit, but refuses a lease shorter than its unit likewise, in Claim
// and in Renew: rounded down, such a lease would be a claim lapsed at
// birth, which any duplicate could take over (storetest checks this).
//
// Errors: any error other than ErrStaleToken (and ErrClaimDeclined from
// Claim) means the store could not answer (unreachable, context done,
// ...). The Middleware then fails closed.
// Methods honour ctx cancellation and deadlines: a call whose ctx is done
// when it is made changes nothing (storetest checks this); one whose ctx
// ends while the store works may have taken effect, as any call that
// returns an error may.
//
// Implementations must be safe for concurrent use by multiple goroutines and,
// for shared stores, by multiple processes.
type Store interface {
	// Claim atomically reserves k for the caller when k is absent or expired,
	// or takes it over when it is in progress with a lapsed lease and the same
	// fingerprint. The new claim's lease lasts lease, and the entry is kept for
	// ttl. Otherwise nothing changes and the result carries the blocking
	// Entry: completed, in progress with a live lease, or any entry whose
	// fingerprint differs (the caller answers 422; a different fingerprint
	// never takes over).
	//
	// The blocking Entry's Response is read-only: a store may share it
	// with every caller that replays it (no copy per replay), so the
	// caller must not modify its Header, the Header's value slices, or its
	// Body. The Middleware copies the values it writes to a response.
	Claim(ctx context.Context, k Key, fingerprint string, lease, ttl time.Duration) (ClaimResult, error)

	// Renew extends the lease of the claim held with token to lease from now.
	// It succeeds even when the lease had lapsed, as long as nobody took over.
	Renew(ctx context.Context, k Key, token int64, lease time.Duration) error

	// Complete stores resp as the outcome of the claim held with token and
	// keeps the entry for ttl from now. It must not modify resp, nor keep
	// references to resp.Header or resp.Body after it returns (copy what it
	// keeps): the caller goes on using them. A store that cannot keep resp
	// returns an error wrapping ErrResponseNotStorable and changes nothing.
	Complete(ctx context.Context, k Key, token int64, resp Response, ttl time.Duration) error

	// Release drops the claim held with token so that the next Claim acquires
	// k anew (after a 5xx, a panic, ...). The next token must still be greater.
	Release(ctx context.Context, k Key, token int64) error

	// Get returns the entry for k. found is false when k is absent, expired or
	// released; the Entry is then the zero value. Unlike Claim's, its
	// Response is the caller's to modify.
	Get(ctx context.Context, k Key) (e Entry, found bool, err error)
}

// Watcher is implemented by stores that can tell a waiting request when an
// entry in progress may have settled (completed, released or expired), so
// that WithWaitForResult wakes it at once instead of polling the store.
// Redis pub/sub and PostgreSQL LISTEN/NOTIFY are such mechanisms.
//
// Watch starts watching k and returns a channel that is closed once k was
// completed or released after Watch returned, and a stop function the
// caller calls when it no longer waits (whether or not the channel was
// closed). A store may close the channel spuriously, and may miss a
// settlement (a notification lost while its connection was down): the
// Middleware checks the entry again after every wake-up and polls slowly as
// a fallback. An error means the store could not start watching; the
// Middleware then polls. Watch must be safe for concurrent use.
type Watcher interface {
	Watch(ctx context.Context, k Key) (settled <-chan struct{}, stop func(), err error)
}

// TxStore is a Store that can also run a claim, the handler's own writes and
// the stored outcome in one database transaction. The Middleware runs in
// transactional mode when it is given a TxStore: it calls BeginTx for each
// protected request, claims in the transaction, hands the transaction to the
// handler through the request context, stores the outcome in it and commits;
// a 5xx, a panic or a failed commit rolls everything back. No lease is used:
// a crashed instance's transaction rolls back and frees the key.
//
// Like a Store, a TxStore must be safe for concurrent use; each Tx it begins
// is used by one goroutine at a time.
type TxStore interface {
	Store
	// BeginTx starts a transaction.
	BeginTx(ctx context.Context) (Tx, error)
}

// Tx is one transaction of a TxStore. It is used by one goroutine at a time.
type Tx interface {
	// Context returns a copy of ctx that carries the transaction, for the
	// handler. The store package provides the accessor (for example
	// pgstore.TxFromContext).
	Context(ctx context.Context) context.Context

	// Claim reserves k inside the transaction. While another transaction
	// holds an uncommitted claim on k, Claim waits for it, bounded by the
	// store's lock timeout; when the wait times out it reports an entry in
	// progress (not Acquired) rather than an error. Otherwise it answers like
	// Store.Claim.
	Claim(ctx context.Context, k Key, fingerprint string, ttl time.Duration) (ClaimResult, error)

	// Complete stores resp as the outcome, inside the transaction. Like
	// Store.Complete, it must not modify resp nor keep references to its
	// Header or Body after it returns, and a store that cannot keep resp
	// returns an error wrapping ErrResponseNotStorable and keeps nothing of
	// it, leaving the transaction usable: the Middleware then calls
	// Complete again with a not-replayable outcome (Response.Oversize),
	// which must fit, and commits. The transaction holds its claim
	// until it ends, so a claim whose ttl passed meanwhile (a handler
	// slower than the ttl) is still held: the outcome is stored and kept
	// for ttl from then on.
	Complete(ctx context.Context, k Key, token int64, resp Response, ttl time.Duration) error

	// Commit makes the claim, the handler's writes and the outcome visible
	// together.
	Commit(ctx context.Context) error

	// Rollback discards everything. It is safe to call after Commit, when it
	// does nothing.
	Rollback(ctx context.Context) error
}
