package redisstore

import (
	"time"

	"github.com/saferetry/saferetry/internal/replaymix"
)

// DefaultPrefix is the key prefix used when WithPrefix is not given.
const DefaultPrefix = "saferetry:idem:"

// Option configures a Store. Options are applied in order by New; a nil
// Option is ignored. An Option is a plain function: one may be given to
// several New calls, from any goroutine.
type Option func(*config)

type config struct {
	prefix      string
	waitN       int
	waitTimeout time.Duration
	replayPath  replaymix.Mode
}

// WithPrefix sets the prefix of every Redis key the store writes. The default
// is DefaultPrefix; an empty prefix is allowed. Stores with different
// prefixes never see each other's entries, which lets several applications
// (or tests) share one Redis database. Do not put braces in the prefix: a
// "{" there would form a Redis Cluster hash tag with the "{}" that follows
// the prefix in every name (see the package documentation), and every entry
// would then land in one slot.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithWait makes every write (Claim that acquires, Renew, Complete, Release)
// wait until at least replicas replicas acknowledged it, or until timeout,
// using Redis WAIT in the same round trip as the write (see below for long
// timeouts). When fewer replicas
// acknowledge in time, the method returns an error matching
// ErrNotReplicated; the write itself stays applied on the primary. A timeout
// of 0 waits forever (Redis semantics), so give one; a timeout under a
// millisecond waits one millisecond, and a negative one makes New panic.
// A timeout of 0, or one that does not leave half a second of the client's
// ReadTimeout (or of the context's deadline, on a client with
// ContextTimeoutEnabled), is waited out in full: WAIT then follows the
// write in a round trip of its own, on the same connection. A WAIT that
// fails after the write also ends in ErrNotReplicated.
// replicas <= 0, the default, disables waiting.
//
// What is waited for, and what is not: a Complete or Release sent again
// (the Middleware resends one that failed) writes its entry anew and waits
// again, so it reports ErrNotReplicated for as long as the replicas lack
// the first write. The releases that the Store makes itself, of a claim
// acquired for a Claim whose caller left (or that a go-redis hook's panic
// cut short), wait too, but their ErrNotReplicated reaches nobody. Not
// waited for: the release that gives back a claim whose own WAIT failed
// (it follows the claim in the primary's replication stream, so a replica
// that got the claim gets it too, unless the primary fails between the
// two); a Claim that does not acquire, which writes nothing; the mark of
// a request that waits for an entry (see Store.Watch), whose loss only
// makes its waiters poll. A release lost in a failover brings the claim
// back on the promoted primary, every retry answered "in progress" until
// its lease lapses (a delay, not a second execution); a completion lost so
// (reported ErrNotReplicated, an OutcomeStoreError to the Middleware)
// lets the operation run again once the lease lapses.
//
// It narrows the window in which a failover loses an acknowledged claim; it
// does not close it. On a primary with fewer replicas than asked (the one
// promoted in a failover, until a replica rejoins it), an acquiring Claim
// fails and gives its claim back, and the Middleware answers 503; after
// the first WAIT that comes back short, the Store asks ROLE in place of
// WAIT and fails at once, so nothing waits out the timeout again (a user
// whose ACL denies ROLE, an @admin and @dangerous command, waits out WAIT
// on every such write instead). See
// "Failover on Redis Cluster" in the package documentation. It works with a *redis.Client, a failover client and a
// *redis.ClusterClient (WAIT goes to the primary that owns the key), and
// with no other client: WAIT answers for the connection it is sent on, so
// the Store sends it on the write's own, which another UniversalClient
// (go-redis's AutoPipeliner, say) does not let it choose, and New panics
// when WithWait is given one.
func WithWait(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		c.waitN = replicas
		c.waitTimeout = timeout
	}
}

// WithReplayFastPath makes Claim read the entry with a plain GET before
// every claim, and answer a completed entry from it, running the claim
// script only when the key is absent, in progress or released, or holds a
// hash entry of an earlier version (which GET cannot read). A replay
// then costs Redis what a GET costs instead of a script call (EVALSHA
// and the script's Redis calls: BenchmarkServerTime), and a first
// execution one round trip more (three instead of two, the GET finding
// nothing). By default the Store does this only while replays are frequent
// (see "The replay fast path" in the package documentation); this option
// does it always, WithoutReplayFastPath never. Reading without the script
// is safe: no script changes a completed entry (Complete, Renew and
// Release require an entry in progress, the claim script returns a
// completed entry as it is), and Redis does not return an entry past its
// expiry. Under WithWait the read waits for no replica: it writes nothing.
func WithReplayFastPath() Option {
	return func(c *config) { c.replayPath = replaymix.Always }
}

// WithoutReplayFastPath makes every Claim the one claim script, whatever
// the share of replays: a first execution always costs two round trips and
// a replay one script call.
func WithoutReplayFastPath() Option {
	return func(c *config) { c.replayPath = replaymix.Never }
}
