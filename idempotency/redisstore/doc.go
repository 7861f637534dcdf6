// Package redisstore keeps idempotency entries in Redis, so that every
// instance of an application that shares one Redis sees the same claims and
// stored outcomes. It implements idempotency.Store on
// github.com/redis/go-redis/v9; most callers want:
//
//	store := redisstore.New(rdb)
//	handler = idempotency.Middleware(store)(handler)
//
// # Data layout
//
// Each (scope, key) pair is one Redis string named
//
//	<prefix>{}<len(scope)>:<scope>:<key>
//
// The decimal length of the scope makes the name unambiguous: ("a:b", "c")
// and ("a", "b:c") map to different entries. The empty {} is not a hash tag;
// it stops braces in a client's key (say "{x}") from becoming one, which
// would pile every such entry into one Redis Cluster slot. Every operation (claim, takeover,
// renew, complete, release, get) is one Lua script that touches exactly that
// one key, so the store is safe on Redis Cluster by construction: no hash tag
// is needed and no operation ever spans slots. Each call is one round trip
// (EVALSHA, falling back to EVAL once after the server's script cache was
// flushed).
//
// # The replay fast path
//
// A replay through the claim script costs Redis a script call (EVALSHA and
// its Redis calls); a plain GET of the entry costs less, but a
// first execution then pays the GET that finds nothing, a third round
// trip. The Store chooses per window of 64 claims (internal/replaymix):
// once at least 90 % of a window's claims found a completed entry (a storm
// of retries, or a client replaying on purpose), the next claims read
// first and answer a completed entry from the GET, running the claim
// script only when there is none; under 80 % they go back to the claim
// script alone. A new Store starts on the claim script, so the usual mix,
// where replays are rare, keeps two round trips per first execution.
// WithReplayFastPath reads first always, WithoutReplayFastPath never.
// Either path gives the same answer in every state, so the choice changes
// what a claim costs, never what it answers. The GET goes where the
// client sends reads: with a client that routes read-only commands to
// replicas (ReadOnly, RouteByLatency or RouteRandomly in go-redis), a
// replica may answer it. One that lags behind answers nothing yet, and the
// claim script then runs on the primary; but one whose clock is behind the
// primary's may still answer an entry that has just expired there. Give
// such a client WithoutReplayFastPath.
//
// Headers are stored byte for byte (NUL, invalid UTF-8 and all), in a
// binary form; the JSON form of earlier versions is still read.
//
// An entry holds its state, its fencing token, its lease (start and
// length, on the server's clock) and the fingerprint, then, once
// completed, the outcome, packed in one string (the layout is in
// entry.go). A new claim is then one SET NX with its expiry inside the
// script, a replay one GET, and nothing in the entry needs a field name. A
// fingerprint that ends in a hex SHA-256 (as the middleware's "v1:"
// fingerprints do) keeps its digest as 32 bytes. A completed entry with a
// 37-byte body takes 232 bytes, one in progress 168 (MEMORY USAGE, in
// TestEntryMemory), against 264 and 168 for the listpack hash of the
// previous version and hash tables of 595 to 675 (their size varies from
// run to run) and 440 for the one before.
//
// # Format change
//
// Earlier versions kept each entry in a hash: the version just before this
// one with the fingerprint in field f, in the form above, and the one
// before it verbatim, 67 bytes of hex, in field fp. This version reads
// both: a hash entry replays, blocks, is taken over (and rewritten as a
// string) or is claimed anew after its release exactly as before, and a
// waiter on this version marks one in progress as those versions expect.
// An old instance holding a hash completes, renews and releases it as
// before, until a new instance takes it over after its lease lapsed: the
// old holder's Complete, Renew and Release then fail with WRONGTYPE, a
// store error, where the same version would have answered ErrStaleToken;
// its outcome is not stored either way.
//
// Earlier versions do not read strings (TestMixedVersions runs the
// previous version's scripts beside this one): each of their scripts
// first reads the entry with HGET or HMGET, which Redis refuses
// (WRONGTYPE) on a string, so while both versions serve one prefix an old instance answers
// a key that a new one wrote with 503, store unavailable, and its handler
// does not run: the mix fails closed, never executes twice, and a client's
// retry that reaches a new instance gets the right answer. Roll the new
// version out quickly, or stop the old instances before the new ones take
// traffic, to keep those 503s few. (A prefix of the new version's own
// would avoid them but forget the old entries, and the retries of their
// operations would execute again.)
//
// # Load and waiting requests
//
// Claim and Get (the request path) hold at most three quarters of the
// client's pool (PoolSize) at once, so that Renew, Complete and Release,
// which keep claims alive and record outcomes, always find a connection. A
// cluster client keeps a pool per node, and the bound is per primary too:
// claims waiting on a primary that hangs (stopped, or cut off until its
// failover) never hold up those of the others. The Store implements
// idempotency.Watcher: a request waiting for an entry
// (idempotency.WithWaitForResult) marks its entry, the complete and release
// scripts then PUBLISH the entry's name on <prefix>settled in the same
// round trip, and one subscription of the Store's own, open while somebody
// waits on this instance, wakes the waiters. Entries nobody waits for
// publish nothing. While somebody waits, the subscription is sent a PING
// after every 10 s without a message; one that does not answer within 2 s
// (its connection died without a reset, as behind a NAT or firewall that
// forgot it) is replaced by a new one, whose start wakes every waiter to
// look again; until then they poll once a second.
//
// # Shutdown
//
// On a client that reads under the context's deadline
// (ContextTimeoutEnabled), a Claim whose caller leaves (its deadline, a
// cancellation) while its script is on its way returns at once, and the
// script runs on, on a goroutine of the Store's, which releases the claim
// it made for nobody. Closing the client under it loses that answer, and
// the key stays held until its lease lapses. So at shutdown, after the
// server's Shutdown and before the client's Close, call Store.Drain, which
// waits for them (examples/redis-server does).
//
// # Time and tokens
//
// Leases and the fencing tokens are decided by the Redis server's clock
// (TIME inside the scripts), never by the application's, so instances whose
// clocks disagree still agree on who holds a lease. Expiry is Redis key
// expiry (SET's PX): an entry lives ttl after its claim or its completion,
// whichever came last, and at least until the end of the lease its holder
// last renewed (so a handler that outlives the ttl keeps its claim), and
// Redis removes it without any scan. A released
// claim keeps its entry, marked released, until that expiry, so the key
// remembers its last token. New tokens are the larger of the previous token
// plus one and the server time in microseconds, so a token stays greater
// than every token issued before for the key even after the key expired and
// was claimed anew, as long as the server's clock does not step back.
//
// The clock is that of the node that holds the entry, and a failover
// changes it: the promoted replica judges the leases of the entries the
// failed primary wrote by its own clock. If it runs ahead of the failed
// primary's by d, every lease in progress lapses d early, so that a
// duplicate may take over a claim whose handler still runs, and the
// operation runs twice (the first holder's Complete then fails with
// ErrStaleToken, and its outcome is not stored); entries may expire d
// early too. If it runs behind, leases last d longer, and a key that
// expired and is claimed anew may get a token smaller than one issued
// before the failover. The Store cannot see the skew, as it never
// compares two nodes' clocks: keep the clocks of every node that may
// become a primary synchronized (NTP) to well within the shortest lease.
//
// # Required Redis settings
//
// Redis 5 or newer (scripts replicate their effects, which lets them read
// TIME); tested with Redis 7.
//
// maxmemory-policy must be noeviction, or a volatile-* policy only if the
// memory budget guarantees it never triggers: every entry carries a TTL, so
// volatile-lru, volatile-lfu, volatile-random and volatile-ttl may all evict
// it, and allkeys-* certainly will. An evicted claim or outcome is a second
// execution of the operation on the next retry. With noeviction a full
// Redis refuses writes, a Claim that must write (a new key, a takeover, a
// released key) fails, and the middleware answers 503 instead; a claim of
// a completed key or of one in progress is still answered (a replay, 409)
// on either replay path. The claims already held still settle: their
// renewals, completions and releases run as scripts flagged allow-oom
// (Redis 7 or newer; an older server refuses them like any write, and a
// claim that cannot complete runs again after its lease lapses).
//
// Persistence: without AOF (appendonly yes, ideally appendfsync everysec or
// always) or RDB snapshots, a Redis restart forgets every claim and outcome,
// and retries in flight execute again.
//
// Store.Check reads these settings from the server (from every primary of
// a cluster) and reports each one under which Redis may forget entries: an
// evicting maxmemory-policy, appendonly no (telling whether RDB snapshots
// are taken at least), appendfsync no. It falls back to INFO where CONFIG
// is disabled, as managed services often do. Call it at start-up and log
// what it finds; cmd/mockserver prints each problem as a warning.
//
// Replication: Redis replicates asynchronously. When a primary fails over,
// claims and outcomes it acknowledged but had not yet sent to the promoted
// replica are lost, and a retry may execute the operation a second time.
// Enable WithWait to make claims, renewals, completions and releases wait
// for replica acknowledgement (Redis WAIT) when that window matters (its
// documentation lists the few writes it does not wait for); it narrows the
// window, it does not make Redis a consensus system.
//
// # Failover on Redis Cluster
//
// go-redis's ClusterClient learns where slots moved from MOVED and ASK
// replies, and otherwise reloads its slot map only every
// ClusterStateReloadInterval (60 s by default). A primary killed outright
// sends neither: without help, a store keeps dialling the dead node and
// answers 503 on its slots for up to a minute after its replica took over.
// So a Store on a *redis.ClusterClient reloads the client's slot map
// (ClusterClient.ReloadState) whenever a call finds a node unreachable (a
// refused or timed-out dial, a reset or closed connection, a read or write
// timeout, CLUSTERDOWN), or, with WithWait, whose pipeline goes to one node
// without go-redis's redirections, a MOVED, ASK or READONLY reply; at most
// once every 250 ms. It costs nothing while the cluster is healthy, unlike
// a short reload interval, which would send CLUSTER SLOTS from every client
// all the time and still leave up to one interval of 503s. A reload cannot
// help with ASK, the answer of a slot being migrated key by key for a key
// its owner no longer holds: the slot stays the owner's until the migration
// ends, or for good if a reshard was interrupted. So WithWait's pipeline
// follows an ASK itself, as go-redis does for the commands it routes: it
// sends ASKING, the script and WAIT again to the node the key is moving to,
// over a connection of its own. The first calls after the promotion that
// follow such a reload reach the new primary: in the tests
// (cluster-node-timeout 1 s, a retry storm on three instances), the failed
// primary's slots served again 0.05 to 0.24 s after the promotion, which
// itself came 2.1 to 2.7 s after the kill -9.
//
// During the failover, requests on the failed primary's slots are answered
// 503 with Retry-After and their handlers do not run; with
// cluster-require-full-coverage yes (Redis's default) every slot answers
// CLUSTERDOWN, so 503, from the moment the node is marked failed until the
// promotion. Claims in flight when the primary died keep their handlers
// running: a claim the replica had received (with WithWait, every
// acknowledged one) is on the promoted primary, its renewals resume after
// the reload, and the Middleware retries its Complete until the store
// timeout (idempotency.DefaultStoreTimeout, 5 s), so its outcome is
// recorded once the new primary is found. Keep cluster-node-timeout well
// below that (Redis's default is 15 s): an outcome not recorded within the
// store timeout leaves the key in progress until its lease lapses, and a
// retry after that runs the operation again. A claim the replica had not
// received yet (without WithWait, the replication lag, typically under a
// millisecond) is lost with the primary; its handler's outcome is refused
// (ErrStaleToken) and a retry runs the operation again.
//
// WithWait on a primary without replicas (the promoted one, until the
// failed node or another replica rejoins it) fails clearly rather than
// degrading: every acquiring Claim fails with ErrNotReplicated, the
// Middleware answers 503 problem+json (store unavailable, with
// Retry-After), the claim is given back so that a retry is not told "in
// progress", and a settling write (Renew, Complete, Release) is applied on
// the primary but reported the same way. A Complete sent again (the
// Middleware retries one that failed so within its store timeout) writes
// the same entry anew and waits for its replication again, so the
// Middleware reports the outcome stored only once enough replicas hold it,
// and an OutcomeStoreError otherwise; a Release sent again likewise, so
// that a release a failover would undo (the claim back, retries answered
// "in progress" until its lease lapses) is not reported done. The release
// that gives back a refused Claim's claim is not waited for (WithWait
// says what is and is not). Only the first write finds out
// by waiting out the WAIT timeout; later writes to that primary send ROLE
// in the same round trip instead of WAIT, and fail at once while it lists
// too few replicas (the slowest of them took 1 to 107 ms in the tests,
// on a busy 2-core machine). ROLE is an @admin and @dangerous command:
// where the client's ACL user may not run it, each write waits out WAIT
// instead. Writing without the
// replicas that WithWait asks for would be exactly the loss it exists to
// prevent, should the primary fail again. To keep those slots writable
// through a failover, give each primary two replicas (WithWait(1, ...) is
// then satisfied by the one left), or let a supervisor restart the failed
// node: it rejoins as the new primary's replica (in the tests, 0.05 to
// 0.92 s after its restart).
package redisstore
