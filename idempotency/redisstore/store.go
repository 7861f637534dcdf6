package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/detach"
	"github.com/saferetry/saferetry/internal/replaymix"
	"github.com/saferetry/saferetry/internal/watchset"
)

// ErrNotReplicated is returned (wrapped) by a write when WithWait is set and
// fewer replicas than asked acknowledged it in time, or WAIT failed after
// the write (then it wraps WAIT's error too). The write is applied on the
// primary regardless. Match it with errors.Is.
var ErrNotReplicated = errors.New("redisstore: write not acknowledged by enough replicas")

var _ idempotency.Store = (*Store)(nil)

// Store is an idempotency.Store kept in Redis: one string per (scope, key),
// every operation one Lua script on that one key, leases and tokens on the
// Redis server's clock. See the package documentation for the Redis settings
// it needs.
//
// Client retries: go-redis may resend a command whose reply was lost
// (Options.MaxRetries, 3 by default). A resent Complete or Release whose first
// send had been applied answers ErrStaleToken, and a resent Claim whose first
// send had acquired answers "in progress" until the lease lapses. Both are
// safe (the outcome is stored, nothing runs twice), only less precise.
//
// Create it with New; the zero value is not usable. A Store is safe for
// concurrent use by multiple goroutines, and any number of processes may
// share one Redis through Stores with the same prefix. At shutdown, call
// Drain before closing the client.
type Store struct {
	// plainSettle: the server refused the allow-oom scripts (a Redis older
	// than 7), so the plain ones settle claims (see settled).
	plainSettle atomic.Bool
	// bulkMax is the server's proto-max-bulk-len, once read (see
	// bulkLimit); 0 until then.
	bulkMax atomic.Int64
	rdb     redis.UniversalClient
	cfg     config
	gates   gates
	watch   watcher
	reload  reloader
	short   shortPrimaries
	// replay chooses Claim's path: GET first, or the claim script
	// straight away (see replayEnter).
	replay *replaymix.Mix
	// deadlineReads: rdb reads under a context's deadline (see
	// readsUnderDeadline).
	deadlineReads bool
	// detached counts Claim's round trips that run on a goroutine of
	// their own (see acquire), for Drain.
	detached detach.Group
	// leaseArg and ttlArg are the last lease (µs) and ttl (ms) given to a
	// script (see lastArg).
	leaseArg, ttlArg lastArg
}

// replayEnter and replayLeave are the shares of replays among the claims
// of a window at which the default Store starts and stops reading an entry
// before claiming it. Reading first saves a replay up to a fifth of a
// read's time and costs a first execution one read that finds nothing
// (measured with the hash entries of the previous version, HMGET against
// a claim script 1.0 to 1.35 times its cost, the more the busier Redis's
// CPU: BENCHMARKS.md): BenchmarkReplayMix showed a loss at 75 % of
// replays and about even from 90 % on, on an idle Redis. So the store reads first
// only when nearly every claim is a replay (a storm of retries, where the
// server time it saves matters most), never in the usual mix.
const (
	replayEnter = 0.9
	replayLeave = 0.8
)

// New returns a Store that keeps its entries in rdb, which must not be nil.
// rdb may be a *redis.Client, a sentinel-backed failover client or a
// *redis.ClusterClient. The Store does not close rdb: Drain the Store
// before closing it. New panics when rdb
// is nil or a *redis.Ring, or WithWait was given a negative timeout or a
// client of another type than those three (see WithWait). A Ring
// takes a shard it finds down out of its hash and sends that shard's keys
// to the others, so a key completed there would be claimed anew on
// another shard and its operation run twice: shard with a Redis Cluster
// instead, whose replicas take over a failed primary's keys.
func New(rdb redis.UniversalClient, opts ...Option) *Store {
	if rdb == nil {
		panic("redisstore: New called with a nil client")
	}
	if _, ok := rdb.(*redis.Ring); ok {
		panic("redisstore: New called with a *redis.Ring: a Ring moves the keys of a shard it finds down to the other shards, " +
			"where a completed key would be claimed anew and its operation run twice; use a *redis.ClusterClient")
	}
	cfg := config{prefix: DefaultPrefix}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.waitN > 0 && cfg.waitTimeout < 0 {
		panic(fmt.Sprintf("redisstore: WithWait(%d, %v): the timeout is negative (Redis refuses it, so every claim would fail)", cfg.waitN, cfg.waitTimeout))
	}
	if cfg.waitN > 0 && !waitable(rdb) {
		panic(fmt.Sprintf("redisstore: WithWait(%d, %v) on a %T: WAIT answers for the connection it is sent on, and must go on the write's, "+
			"to the primary that owns the key, which only a *redis.Client or a *redis.ClusterClient lets the Store choose "+
			"(over another client it would report writes replicated that no replica holds); give New the client itself", cfg.waitN, cfg.waitTimeout, rdb))
	}
	s := &Store{rdb: rdb, cfg: cfg, gates: newGates(rdb),
		replay: replaymix.New(cfg.replayPath, replayEnter, replayLeave)}
	s.watch.store, s.watch.idle, s.watch.pingWait = s, watchset.Idle, watchset.PingWait
	s.watch.settled = s.watch.channel()
	s.reload.cluster, _ = rdb.(*redis.ClusterClient)
	s.deadlineReads = readsUnderDeadline(rdb)
	return s
}

// waitable reports whether WithWait can send WAIT over rdb: a
// *redis.Client (a failover client included) or a *redis.ClusterClient,
// whose connections (Conn, Pipeline) and nodes (MasterForKey) the Store
// picks itself (see runWait). go-redis's AutoPipeliner, say, sends Do on
// any pooled connection and a keyless WAIT to any primary.
func waitable(rdb redis.UniversalClient) bool {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
		return true
	}
	return false
}

// poolSize returns the size of rdb's connection pool (per node for a
// cluster), as go-redis computed it.
func poolSize(rdb redis.UniversalClient) int {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		return c.Options().PoolSize
	}
	return 10 * runtime.GOMAXPROCS(0) // go-redis's default
}

// redisKey names the entry of k. The scope's length comes first so that no
// two (scope, key) pairs share a name, whatever bytes they contain. The empty
// "{}" before them is no hash tag itself, and being the first brace pair it
// keeps braces in the client's scope or key from acting as one: Redis
// Cluster hashes the whole name, so entries spread over all slots.
func (s *Store) redisKey(k idempotency.Key) string {
	return bytesString(s.appendKey(make([]byte, 0, s.keyLen(k)), k))
}

// keyLen is the length of k's entry's name (see redisKey).
func (s *Store) keyLen(k idempotency.Key) int {
	digits := 1
	for n := len(k.Scope); n >= 10; n /= 10 {
		digits++
	}
	return len(s.cfg.prefix) + len("{}") + digits + 1 + len(k.Scope) + 1 + len(k.Key)
}

// appendKey appends the name of k's entry (see redisKey) to b.
func (s *Store) appendKey(b []byte, k idempotency.Key) []byte {
	b = append(b, s.cfg.prefix...)
	b = append(b, "{}"...)
	b = strconv.AppendInt(b, int64(len(k.Scope)), 10)
	b = append(b, ':')
	b = append(b, k.Scope...)
	b = append(b, ':')
	return append(b, k.Key...)
}

// keyAnd returns the name of k's entry (redisKey) and what more appends
// after it, in one allocation of n bytes beyond the name's length, as two
// strings: a script's key and an argument built alike (the stored
// fingerprint of a claim, the head of a completion) for the price of one.
func (s *Store) keyAnd(k idempotency.Key, n int, more func(b []byte) []byte) (name, arg string) {
	b := s.appendKey(make([]byte, 0, s.keyLen(k)+n), k)
	at := len(b)
	all := bytesString(more(b))
	return all[:at], all[at:]
}

// Claim implements idempotency.Store.
func (s *Store) Claim(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if err := checkTTL(ttl); err != nil {
		return idempotency.ClaimResult{}, wrap(ctx, "claim", err)
	}
	if err := checkLease(lease); err != nil {
		return idempotency.ClaimResult{}, wrap(ctx, "claim", err)
	}
	name, stored := s.keyAnd(k, maxStoredFingerprint(fingerprint), func(b []byte) []byte { return appendFingerprint(b, fingerprint) })
	g := s.gates.forKey(ctx, name)
	if err := g.Enter(ctx); err != nil {
		return idempotency.ClaimResult{}, wrap(ctx, "claim", err)
	}
	handedOff := false // to acquire's script, which leaves the gate (see acquire)
	defer func() {
		if !handedOff {
			g.Leave()
		}
	}()
	res, handedOff, err := s.acquire(ctx, g, k, name, stored, lease, ttl)
	if err != nil {
		return idempotency.ClaimResult{}, wrap(ctx, "claim", err)
	}
	return res, nil
}

// completedEntry is Claim's fast path (see replayEnter): the entry named
// name read with GET, ok only when it is completed. A hash entry of an earlier
// version, which GET answers WRONGTYPE, is left to the claim script.
func (s *Store) completedEntry(ctx context.Context, name string) (idempotency.Entry, bool, error) {
	v, err := s.rdb.Get(ctx, name).Result()
	if errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "WRONGTYPE") {
		return idempotency.Entry{}, false, nil
	}
	s.reload.failed(err)
	if err != nil {
		return idempotency.Entry{}, false, err
	}
	if len(v) == 0 || v[0] != stateCompleted {
		return idempotency.Entry{}, false, nil
	}
	e, found, err := decodeString(v, "")
	if err != nil || !found {
		return idempotency.Entry{}, false, err
	}
	return e, true, nil
}

// Renew implements idempotency.Store. It also keeps the entry at least until
// the end of the new lease (never shortening it), so that a claim whose
// holder outlives the ttl does not expire under it.
func (s *Store) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if err := checkLease(lease); err != nil {
		return wrap(ctx, "renew", err)
	}
	return s.fenced(ctx, "renew", renewScript, s.redisKey(k), strconv.FormatInt(token, 10), s.leaseArg.box(micros(lease)))
}

// Complete implements idempotency.Store. The header is stored byte for byte
// (internal/headercodec) and the body as raw bytes; a nil Header or Body
// reads back as nil, an empty one as empty. An answer longer than Redis
// takes as one argument (proto-max-bulk-len) is refused with
// idempotency.ErrResponseNotStorable.
func (s *Store) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return wrap(ctx, "complete", err)
	}
	hdrLen := headerLen(resp)
	name, head := s.keyAnd(k, maxCompletedHead(resp, hdrLen), func(b []byte) []byte { return appendCompletedHead(b, token, resp, hdrLen) })
	if len(head) > minBulkLimit {
		if limit := s.bulkLimit(ctx); len(head) > limit {
			return fmt.Errorf("redisstore: complete: %w: the answer takes %d bytes, over the server's proto-max-bulk-len of %d",
				idempotency.ErrResponseNotStorable, len(head), limit)
		}
	}
	err := s.fenced(ctx, "complete", completeScript, name, headToken(head), s.ttlArg.box(millis(ttl)), s.watch.settled, head)
	if tooLong(err) {
		return fmt.Errorf("%w: %w", idempotency.ErrResponseNotStorable, err)
	}
	return err
}

// minBulkLimit is the least proto-max-bulk-len Redis accepts (1mb): no
// argument up to it is ever refused for its length.
const minBulkLimit = 1 << 20

// bulkLimit returns the longest argument the server takes
// (proto-max-bulk-len), read once; a server that does not say (CONFIG
// refused, as managed services do) is taken to have Redis's default,
// 512 MB. An argument over it is refused as a protocol error, and the
// server drops the connection meanwhile, so that the refusal often comes
// back as a broken connection, indistinguishable from a lost write: the
// length is checked before sending instead.
func (s *Store) bulkLimit(ctx context.Context) int {
	if n := s.bulkMax.Load(); n > 0 {
		return int(n)
	}
	n := int64(512 << 20)
	kv, err := s.rdb.ConfigGet(ctx, "proto-max-bulk-len").Result()
	var refused redis.Error
	switch {
	case err == nil:
		if v, err := strconv.ParseInt(kv["proto-max-bulk-len"], 10, 64); err == nil && v >= minBulkLimit {
			n = v
		}
	case !errors.As(err, &refused):
		return int(n) // not cached: a broken connection or the caller's deadline, not the server's answer
	}
	s.bulkMax.Store(n)
	return int(n)
}

// tooLong reports whether err is Redis's refusal of an argument longer
// than its proto-max-bulk-len (after bulkLimit was read, the limit was
// lowered): a protocol error, so nothing ran.
func tooLong(err error) bool {
	if err == nil {
		return false // before errors.As, whose target would cost an allocation
	}
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(re.Error(), "invalid bulk length")
}

// Release implements idempotency.Store. The released entry keeps its token,
// hidden from Get and Claim, until it expires.
func (s *Store) Release(ctx context.Context, k idempotency.Key, token int64) error {
	return s.fenced(ctx, "release", releaseScript, s.redisKey(k), strconv.FormatInt(token, 10), s.watch.settled)
}

// Get implements idempotency.Store in one round trip.
func (s *Store) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	name := s.redisKey(k)
	g := s.gates.forKey(ctx, name)
	if err := g.Enter(ctx); err != nil {
		return idempotency.Entry{}, false, wrap(ctx, "get", err)
	}
	defer g.Leave()
	res, err := s.run(ctx, getScript, name, nil)
	if err != nil {
		return idempotency.Entry{}, false, wrap(ctx, "get", err)
	}
	e, found, err := decodeEntry(res)
	if err != nil {
		return idempotency.Entry{}, false, wrap(ctx, "get", err)
	}
	return e, found, nil
}

// fenced runs a script on the entry named name that answers 1 when the
// token held the claim and 0 when it was stale.
func (s *Store) fenced(ctx context.Context, op string, sc settled, name string, args ...string) error {
	res, err := s.settle(ctx, sc, name, settledWrite, args...)
	if err != nil {
		return wrap(ctx, op, err)
	}
	switch res {
	case int64(1):
		return nil
	case int64(0), int64(2): // 2: the same completion or release again (completeScript, releaseScript)
		return fmt.Errorf("redisstore: %s: %w", op, idempotency.ErrStaleToken)
	}
	return wrap(ctx, op, errUnexpected(res))
}

// run executes sc on key in one round trip. wrote, when WithWait is set and
// not nil, tells from the script's result whether it wrote, and so whether
// the replicas' acknowledgement must be checked. An error matching
// ErrNotReplicated comes with the script's result.
func (s *Store) run(ctx context.Context, sc *script, key string, wrote func(any) bool, args ...string) (res any, err error) {
	return s.runSent(ctx, ctx, nil, sc, key, wrote, args...)
}

// runSent is run with the script, and what shares its round trip, sent
// and read under sctx, and a WAIT of a round trip of its own under ctx
// (see acquire); the script's command is kept in sent, when not nil (see
// sentScript).
func (s *Store) runSent(ctx, sctx context.Context, sent *sentScript, sc *script, key string, wrote func(any) bool, args ...string) (res any, err error) {
	if s.cfg.waitN <= 0 || wrote == nil {
		res, err = s.eval(sctx, sent, sc, key, args)
	} else {
		res, err = s.runWait(ctx, sctx, sent, sc, key, wrote, args...)
	}
	s.reload.failed(err)
	return res, err
}

// eval runs sc on key with args in one round trip, as go-redis's
// Script.Run does: EVALSHA, then EVAL when the server lacks the script.
// Each command is kept in sent, when not nil, before it is sent.
func (s *Store) eval(ctx context.Context, sent *sentScript, sc *script, key string, args []string) (any, error) {
	cmd := sc.cmd(ctx, true, key, args)
	sent.keep(cmd)
	_ = s.rdb.Process(ctx, cmd)
	res, err := cmd.Result()
	if isNoScript(err) {
		cmd = sc.cmd(ctx, false, key, args)
		sent.keep(cmd)
		_ = s.rdb.Process(ctx, cmd)
		res, err = cmd.Result()
	}
	return res, err
}

// settle runs sc's allow-oom form, or its plain form on a server that
// refused the former once (see settled).
func (s *Store) settle(ctx context.Context, sc settled, key string, wrote func(any) bool, args ...string) (any, error) {
	if !s.plainSettle.Load() {
		res, err := s.run(ctx, sc.oom, key, wrote, args...)
		if !flagsUnknown(err) {
			return res, err
		}
		s.plainSettle.Store(true)
	}
	return s.run(ctx, sc.plain, key, wrote, args...)
}

// flagsUnknown reports whether err is a server's refusal of a script that
// begins with a shebang line of flags, before running any of it: Redis
// before 7 reads the line as Lua, in which '#' cannot start a statement
// ("Error compiling script"), and a server that reads shebangs but not
// this flag names the shebang. Other refusals that name a script's flags
// (a read-only replica's, a failing disk's) are not it: they pass.
func flagsUnknown(err error) bool {
	if err == nil {
		return false // before errors.As, whose target would cost an allocation
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := strings.ToLower(re.Error())
	return strings.Contains(msg, "error compiling script") || strings.Contains(msg, "shebang")
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// acquired reads a claim script's result: the token of an acquired
// claim, and whether it took an entry in progress over (the script then
// answers the token negated); ok is false when it did not acquire.
func acquired(res any) (token int64, tookOver, ok bool) {
	n, ok := res.(int64)
	if !ok || n == 0 {
		return 0, false, false
	}
	if n < 0 {
		return -n, true, true
	}
	return n, false, true
}

// isAcquired reports whether a claim script result is an acquired claim.
func isAcquired(res any) bool {
	_, _, ok := acquired(res)
	return ok
}

// settledWrite tells whether a settling script wrote: 1, settled, or 2, a
// completion or release sent again, which writes the entry anew for WAIT
// to check.
func settledWrite(res any) bool { return res == int64(1) || res == int64(2) }

// wrap prefixes err with the package and operation, and keeps ctx's own
// error matchable when the context ended, whatever error the client saw.
func wrap(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("redisstore: %s: %w: %w", op, cerr, err)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("ttl %v is not positive", ttl)
	}
	return nil
}

// checkLease refuses a lease that would lapse at birth: any duplicate could
// take such a claim over while its handler runs.
func checkLease(lease time.Duration) error {
	if lease < time.Microsecond {
		return fmt.Errorf("lease %v is not positive", lease)
	}
	return nil
}

// micros is d in whole microseconds, for a script's ARGV (go-redis sends
// an int64 in decimal); a negative lease counts as zero.
func micros(d time.Duration) int64 {
	return max(d.Microseconds(), 0)
}

// millis is d in milliseconds, rounded up: a ttl below one millisecond
// still keeps the entry for a moment, and a WAIT timeout below one is not
// 0, which WAIT takes as "for ever" (0 stays 0, as WithWait documents).
func millis(d time.Duration) int64 {
	return clock.CeilUnits(d, time.Millisecond)
}

// lastArg keeps the last number given to it as a script's argument: its
// decimal. Callers give the same lease and ttl call after call (the
// Middleware its configured ones), which then cost a script call neither
// the allocation of the decimal nor formatting it; Redis reads every ARGV
// as a string, so the command is the same. The zero value is empty; it is
// safe for concurrent use.
type lastArg struct{ p atomic.Pointer[boxedArg] }

type boxedArg struct {
	n   int64
	arg string
}

// box returns n's decimal: the one kept when it is n's, else a new one,
// which is kept.
func (l *lastArg) box(n int64) string {
	if b := l.p.Load(); b != nil && b.n == n {
		return b.arg
	}
	b := &boxedArg{n: n, arg: strconv.FormatInt(n, 10)}
	l.p.Store(b)
	return b.arg
}

func errUnexpected(res any) error {
	return fmt.Errorf("unexpected script result %T %.64v", res, res)
}
