package memstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/watchset"
)

var _ idempotency.Store = (*Store)(nil)

// errNonPositive is returned by Claim, Renew and Complete when a lease or ttl
// is not positive: such an entry would be lapsed or expired at birth.
var errNonPositive = errors.New("memstore: lease and ttl must be positive")

// ErrFull is returned (wrapped) by Claim when a new key would take the store
// past its entry bound or its byte bound (WithMaxEntries, WithMaxBytes) and
// sweeping the entries already expired did not make room.
// The store changes nothing: live claims and completed records are never
// evicted to make room, because an evicted record is a second execution of
// its operation on the next retry. The Middleware answers the request with
// 503 and Retry-After, like any store failure. Match it with errors.Is.
var ErrFull = errors.New("memstore: store is full")

// errNoRoom tells Complete that the response did not fit in the byte bound.
var errNoRoom = errors.New("memstore: no room for the response")

const shardCount = 64

// Store is an in-memory idempotency.Store for single-instance applications
// and tests. Create it with New; the zero value is not usable. It is safe for
// concurrent use by multiple goroutines. Call Close when done to stop the
// background sweep.
//
// Fencing tokens come from one store-wide counter, so they grow per key even
// across Release and expiry.
//
// It holds a bounded number of entries and a bounded estimate of heap bytes
// (WithMaxEntries, WithMaxBytes; by default DefaultMaxEntries and
// DefaultMaxBytes). At a bound, Claim of a new key fails with ErrFull and
// Complete of a response that does not fit fails with
// idempotency.ErrResponseNotStorable; nothing is evicted early.
type Store struct {
	shards [shardCount]shard
	tokens atomic.Int64
	now    func() time.Time
	// monotonic: now is clock.MonotonicNow (no WithClock), which
	// readOffset reads without building its time.Time.
	monotonic bool
	budget    budget

	watching atomic.Int64                  // requests watching, across all keys
	watchers watchset.Set[idempotency.Key] // their channels, by key

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// shard is one of the Store's locks and the entries under it. It is
// padded to a multiple of 128 bytes, two cache lines, and ends with what no
// request writes (base, the padding), so that a shard's lock and map share
// no cache line with what a core working on its neighbour writes
// (TestShardSize).
type shard struct {
	shardState
	_ [(128 - unsafe.Sizeof(shardState{})%128) % 128]byte
}

type shardState struct {
	mu  sync.Mutex
	m   map[idempotency.Key]*entry
	exp expiryQueue // every expiry ever set in m, soonest first; see sweepExpired
	b   *budget     // the store's, shared by every shard
	// base is the store's clock at New, from which the shard counts its
	// times (see offset).
	base time.Time
}

// offset is t as the shard keeps times: the time from base, as Sub counts
// it. Sub and Before read the same clock (the monotonic one when both
// times have it, else the wall clock), so offsets compare as the times
// do, and the expiry queue's order is the order in which entries expire
// even when the wall clock is stepped, which Unix time would not be: an
// entry due by the wall clock and not by the monotonic one would go back
// into the queue as due, for ever.
//
// An int64 counts about 292 years each way; a reading further from base
// is outside the store's range: ok is false, and the store refuses to
// work at it rather than count every lease as lapsed (Sub gives the
// largest Duration, which a duplicate claim would take for a lapsed
// lease) or none (the least).
func (sh *shard) offset(t time.Time) (at int64, ok bool) {
	d := t.Sub(sh.base)
	return int64(d), d != math.MaxInt64 && d != math.MinInt64
}

// errClockRange is returned (wrapped) by every call that reads the clock
// outside the store's range (see shard.offset).
var errClockRange = errors.New("memstore: the clock reads more than 292 years away from its reading when the store was made")

// locked locks the shard of k, reads the clock as an offset of it, and
// returns k's live entry then, if any; the caller unlocks sh.mu, also when
// err (errClockRange, at a reading outside the store's range) is not nil.
func (s *Store) locked(k idempotency.Key) (sh *shard, e *entry, now int64, err error) {
	sh = s.shardFor(k)
	sh.mu.Lock()
	now, ok := s.readOffset(sh)
	if !ok {
		return sh, nil, 0, fmt.Errorf("%w: %v, against %v", errClockRange, s.now(), sh.base)
	}
	return sh, sh.live(k, now), now, nil
}

// readOffset reads the store's clock as an offset of sh (see
// shard.offset). The default clock is read as the time since sh.base,
// which is what offset gives for clock.MonotonicNow's reading (both
// count the monotonic clock), without the time.Time in between.
func (s *Store) readOffset(sh *shard) (int64, bool) {
	if !s.monotonic {
		return sh.offset(s.now())
	}
	d := time.Since(sh.base)
	return int64(d), d != math.MaxInt64 && d != math.MinInt64
}

// sweepBatch bounds how many expiries the sweep handles per hold of a shard
// lock, so that requests on the shard wait for at most one batch.
const sweepBatch = 256

// entry is the stored form of an idempotency.Entry. Its times are
// offsets from the shard's base (see shard.offset), 8 bytes each where a
// time.Time takes 24, so that an entry fits in 64 bytes.
type entry struct {
	state       idempotency.State
	fingerprint string
	token       int64
	leaseUntil  int64 // in progress only
	expiresAt   int64
	queued      int64     // the time of the entry's item in the shard's expiry queue
	resp        *response // completed only
}

// New returns an empty Store. Unless WithCleanupInterval is given a value
// of zero or less, it starts one goroutine that sweeps expired entries; Close
// stops it.
func New(opts ...Option) *Store {
	c := config{interval: DefaultCleanupInterval}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	s := &Store{now: c.now, stop: make(chan struct{}), done: make(chan struct{})}
	if s.now == nil {
		s.now, s.monotonic = clock.MonotonicNow, true
	}
	s.budget.maxEntries, s.budget.maxBytes = int64(DefaultMaxEntries), int64(DefaultMaxBytes)
	if c.maxEntries > 0 {
		s.budget.maxEntries = int64(c.maxEntries)
	}
	if c.maxBytes > 0 {
		s.budget.maxBytes = c.maxBytes
	}
	base := s.now()
	for i := range s.shards {
		s.shards[i].m = make(map[idempotency.Key]*entry)
		s.shards[i].b = &s.budget
		s.shards[i].base = base
	}
	if c.interval > 0 {
		go s.sweepLoop(c.interval)
	} else {
		close(s.done)
	}
	return s
}

// Close stops the background sweep and waits for it to end. It always
// returns nil and may be called more than once. The store stays usable after
// Close; expired entries are then only dropped when touched.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

func (s *Store) sweepLoop(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep(s.now())
		}
	}
}

// sweep removes every entry expired at now, shard by shard and batch by
// batch, releasing each shard's lock between batches. It looks only at
// expiries that are due, never at live entries.
func (s *Store) sweep(now time.Time) {
	for i := range s.shards {
		for {
			if _, _, more := s.shards[i].sweepExpired(now, sweepBatch); !more {
				break
			}
		}
	}
}

// sweepExpired pops up to limit due expiries from the shard's expiry
// queue. Each entry has one queue item, pushed when the entry is created;
// when an item comes due for an entry whose expiry was pushed back since
// (Complete, a takeover), it goes back into the queue at the new time
// instead of the entry being deleted. Items of entries that are gone
// (released, dropped lazily) are discarded. It reports how many entries it
// removed, how many queue items it examined, and whether due items remain.
// At a reading outside the store's range it removes nothing.
func (sh *shard) sweepExpired(now time.Time, limit int) (removed, examined int, more bool) {
	at, ok := sh.offset(now)
	if !ok {
		return 0, 0, false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for examined < limit && sh.exp.due(at) {
		it := sh.exp.pop()
		examined++
		e, ok := sh.m[it.key]
		switch {
		case !ok || e.queued != it.at:
			// The entry is gone, or is a later one under the same key
			// with an item of its own.
			sh.b.give(0, itemSize(it.key))
		case at >= e.expiresAt:
			sh.b.give(0, itemSize(it.key))
			sh.remove(it.key, e)
			removed++
		default:
			sh.queue(it.key, e) // the item goes back: its bytes stay charged
		}
	}
	return removed, examined, sh.exp.due(at)
}

// reclaim sweeps up to one batch of due expiries per shard, for a Claim or
// Complete that found the store full before the background sweep came by
// (or with no background sweep at all). It reports whether it found any due
// expiry: the caller then tries again and, still short of room, calls it
// again until none is due, because a batch may hold only expiries that free
// little or nothing (those of live entries whose expiry moved later, which
// go back into the queue, and those of released entries) while expired
// entries wait behind it. A call pops what is due and puts back only what
// is not due yet, so the calls end. The caller must hold no shard lock.
func (s *Store) reclaim() bool {
	now := s.now()
	freed := false
	for i := range s.shards {
		if _, examined, _ := s.shards[i].sweepExpired(now, sweepBatch); examined > 0 {
			freed = true
		}
	}
	return freed
}

// expireAt moves e's expiry to at. A later expiry needs no new queue item:
// the sweep re-queues the entry when its item comes due. An earlier one
// does, or the entry would outstay its expiry in memory; the caller pays
// itemSize(k) for it (see queues). The shard lock must be held.
func (sh *shard) expireAt(k idempotency.Key, e *entry, at int64) {
	e.expiresAt = at
	if sh.queues(e, at) {
		sh.queue(ownKey(k), e)
	}
}

// ownKey returns k with strings of its own, in one allocation, for what
// the store keeps of it (the map key, queue items): the caller's may be
// slices of a larger string (the middleware's key is a slice of the header
// value, whose sf-string parameters may run to the server's header limit),
// which the store would keep whole while its byte bound counts only their
// length.
func ownKey(k idempotency.Key) idempotency.Key {
	if k.Scope == "" { // the common case: one string to copy
		return idempotency.Key{Key: strings.Clone(k.Key)}
	}
	// Not k.Scope + k.Key, which returns the other string itself when one
	// is empty.
	var b strings.Builder
	b.Grow(len(k.Scope) + len(k.Key))
	b.WriteString(k.Scope)
	b.WriteString(k.Key)
	all := b.String()
	return idempotency.Key{Scope: all[:len(k.Scope)], Key: all[len(k.Scope):]}
}

// queues reports whether expireAt(k, e, at) pushes a queue item.
func (sh *shard) queues(e *entry, at int64) bool { return at < e.queued }

// queue records e's current expiry in the shard's expiry queue. The shard
// lock must be held.
func (sh *shard) queue(k idempotency.Key, e *entry) {
	e.queued = e.expiresAt
	sh.exp.push(expiry{at: e.queued, key: k})
}

// shardFor picks the shard of k with FNV-1a over the scope, a separator and
// the key, so that ("a", "bc") and ("ab", "c") land apart more often than not.
func (s *Store) shardFor(k idempotency.Key) *shard {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(k.Scope); i++ {
		h = (h ^ uint64(k.Scope[i])) * prime
	}
	h = (h ^ 0xff) * prime
	for i := 0; i < len(k.Key); i++ {
		h = (h ^ uint64(k.Key[i])) * prime
	}
	return &s.shards[h%shardCount]
}

// live returns the unexpired entry for k, dropping an expired one. The shard
// lock must be held.
func (sh *shard) live(k idempotency.Key, now int64) *entry {
	e, ok := sh.m[k]
	if !ok {
		return nil
	}
	if now >= e.expiresAt {
		sh.remove(k, e)
		return nil
	}
	return e
}

// remove deletes e, the entry of k, and gives its slot and bytes back. Its
// queue items stay charged until the sweep pops them. The shard lock must be
// held.
//
// e lets go of its response: a caller may hold the Fingerprint of an Entry
// the store returned for as long as it likes, and that string may lie in
// e's own allocation (see newEntry), which it keeps alive; it must not keep
// the response too, which may be as large as the byte bound. Nothing reads
// e's response once e is out of the map (the views handed to replays are
// theirs to hold).
func (sh *shard) remove(k idempotency.Key, e *entry) {
	delete(sh.m, k)
	sh.b.give(1, e.size(k))
	e.resp = nil
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	return nil
}

// Claim implements idempotency.Store. The Response of a refused Claim is
// shared by every replay of the key and must not be modified (Get returns
// a copy). A new key takes an entry and its bytes
// from the bounds, with room for a not-replayable outcome, so that its
// Complete with Response.Oversize always fits. When they are not to be had,
// Claim sweeps the expired entries and, if that frees nothing, fails with
// ErrFull. A takeover keeps the entry's room; it needs more only when its
// ttl ends before the one set so far, and fails with ErrFull likewise.
func (s *Store) Claim(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if err := ctxErr(ctx); err != nil {
		return idempotency.ClaimResult{}, err
	}
	if lease <= 0 || ttl <= 0 {
		return idempotency.ClaimResult{}, errNonPositive
	}
	r, full, err := s.claim(k, fingerprint, lease, ttl)
	for full && err == nil && s.reclaim() {
		r, full, err = s.claim(k, fingerprint, lease, ttl)
	}
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if full {
		entries, bytes := s.budget.entries.Load(), s.budget.bytes.Load()
		return idempotency.ClaimResult{}, fmt.Errorf("%w: %d of %d entries, %d of %d bytes in use",
			ErrFull, entries, s.budget.maxEntries, bytes, s.budget.maxBytes)
	}
	return r, nil
}

// claim is Claim under the shard lock; full reports that the claim would
// acquire but the budget has no room for it.
func (s *Store) claim(k idempotency.Key, fingerprint string, lease, ttl time.Duration) (r idempotency.ClaimResult, full bool, err error) {
	sh, e, now, err := s.locked(k)
	defer sh.mu.Unlock()
	if err != nil {
		return idempotency.ClaimResult{}, false, err
	}
	switch {
	case e == nil:
		if !s.budget.take(1, (&entry{fingerprint: fingerprint}).size(k)+itemSize(k)) {
			return idempotency.ClaimResult{}, true, nil
		}
		// The map key and the queue item share the key's bytes; the
		// fingerprint has its own (see newEntry), or a queue item that
		// outlives its entry (Release, a shorter ttl on completion) would
		// keep them while the byte bound no longer counts them.
		k, e = ownKey(k), newEntry(fingerprint)
		sh.m[k] = e
		e.token = s.tokens.Add(1)
		e.leaseUntil = clock.Later(now, lease)
		e.expiresAt = clock.Later(now, ttl)
		sh.queue(k, e)
		return idempotency.ClaimResult{Acquired: true, Token: e.token, LeaseRemaining: lease}, false, nil
	case e.fingerprint == fingerprint && e.state == idempotency.StateInProgress && now >= e.leaseUntil:
		// The entry keeps its bytes and its reserve; only a shorter ttl
		// than the one queued grows it, by a queue item.
		at := clock.Later(now, ttl)
		if sh.queues(e, at) && !s.budget.take(0, itemSize(k)) {
			return idempotency.ClaimResult{}, true, nil
		}
		e.token = s.tokens.Add(1)
		e.leaseUntil = clock.Later(now, lease)
		sh.expireAt(k, e, at)
		return idempotency.ClaimResult{Acquired: true, Token: e.token, TookOver: true, LeaseRemaining: lease}, false, nil
	default:
		return idempotency.ClaimResult{Entry: e.replayed(now, &s.budget)}, false, nil
	}
}

// withHeld runs update on the entry of k under its shard's lock when token
// holds its claim, and returns ErrStaleToken otherwise (errClockRange at a
// reading outside the store's range); else it returns what update returns.
// now is the store's clock read once under the lock, as an offset (see
// shard.offset).
func (s *Store) withHeld(k idempotency.Key, token int64, update func(sh *shard, e *entry, now int64) error) error {
	sh, e, now, err := s.locked(k)
	defer sh.mu.Unlock()
	if err != nil {
		return err
	}
	if e == nil || e.state != idempotency.StateInProgress || e.token != token {
		return idempotency.ErrStaleToken
	}
	return update(sh, e, now)
}

// Renew implements idempotency.Store. It also keeps the entry at least until
// the end of the new lease, so that a claim whose holder outlives the ttl
// does not expire under it.
func (s *Store) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if lease <= 0 {
		return errNonPositive
	}
	return s.withHeld(k, token, func(sh *shard, e *entry, now int64) error {
		e.leaseUntil = clock.Later(now, lease)
		if e.expiresAt < e.leaseUntil {
			// A holder still renewing outlives the ttl: the entry must not
			// expire under it, or a duplicate would acquire the key anew.
			// Its expiry only moves later, so no queue item is pushed.
			sh.expireAt(k, e, e.leaseUntil)
		}
		return nil
	})
}

// Complete implements idempotency.Store. It keeps a deep copy of resp. When
// the copy does not fit in the byte bound, even after sweeping the expired
// entries, or the body is 2 GiB or longer (its length is kept as an int32),
// it returns an error wrapping idempotency.ErrResponseNotStorable and
// changes nothing. A not-replayable outcome (Response.Oversize with no
// Header and no Body) always fits: its room was taken with the claim.
func (s *Store) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if ttl <= 0 {
		return errNonPositive
	}
	if len(resp.Body) > maxBodyLen {
		// Checked before the copy is built, which would take as much again.
		return fmt.Errorf("memstore: a body of %d bytes is longer than the %d the store keeps: %w",
			len(resp.Body), maxBodyLen, idempotency.ErrResponseNotStorable)
	}
	r := newResponse(&resp)
	size := r.size()
	complete := func(sh *shard, e *entry, now int64) error {
		at := clock.Later(now, ttl)
		grow := size - reserveSize(k) // the response replaces the reserve
		if sh.queues(e, at) {
			grow += itemSize(k)
		}
		if !s.budget.take(0, grow) {
			return errNoRoom
		}
		e.state = idempotency.StateCompleted
		e.leaseUntil = 0
		sh.expireAt(k, e, at)
		e.resp = r
		return nil
	}
	err := s.withHeld(k, token, complete)
	for err == errNoRoom && size <= s.budget.maxBytes && s.reclaim() {
		err = s.withHeld(k, token, complete)
	}
	if err == errNoRoom {
		return fmt.Errorf("memstore: a response of about %d bytes does not fit (%d of %d bytes in use): %w",
			size, s.budget.bytes.Load(), s.budget.maxBytes, idempotency.ErrResponseNotStorable)
	}
	if err == nil {
		s.settled(k)
	}
	return err
}

// Release implements idempotency.Store. The entry's slot and bytes are free
// at once; its expiry's few dozen bytes stay charged until it comes due.
func (s *Store) Release(ctx context.Context, k idempotency.Key, token int64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	err := s.withHeld(k, token, func(sh *shard, e *entry, _ int64) error {
		sh.remove(k, e)
		return nil
	})
	if err == nil {
		s.settled(k)
	}
	return err
}

// Get implements idempotency.Store. The returned Response is a copy the
// caller may modify.
func (s *Store) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return idempotency.Entry{}, false, err
	}
	sh, e, now, err := s.locked(k)
	defer sh.mu.Unlock()
	if err != nil {
		return idempotency.Entry{}, false, err
	}
	if e == nil {
		return idempotency.Entry{}, false, nil
	}
	return e.export(now), true, nil
}

// export returns the public view of e at now (an offset), with a copied
// Response.
func (e *entry) export(now int64) idempotency.Entry {
	out := idempotency.Entry{State: e.state, Fingerprint: e.fingerprint, Token: e.token}
	if e.state == idempotency.StateInProgress {
		out.LeaseRemaining = clock.Between(now, e.leaseUntil)
	}
	if e.resp != nil {
		out.Response = e.resp.export()
	}
	return out
}

// replayed returns the public view of e at now for a refused Claim, which
// the caller must not modify (see idempotency.Store.Claim): its Response is
// the store's own view, shared by every replay, so that a replay copies
// nothing. When the byte bound has no room for the view, it is a copy, made
// for this caller alone. The shard lock must be held.
func (e *entry) replayed(now int64, b *budget) idempotency.Entry {
	if e.resp == nil {
		return e.export(now)
	}
	r := e.resp
	if r.view == nil && b.take(0, r.viewSize()) {
		r.view = &idempotency.Response{Status: int(r.status), Oversize: r.oversize, Body: r.body(), Header: r.httpHeader()}
	}
	if r.view == nil {
		return e.export(now)
	}
	return idempotency.Entry{State: e.state, Fingerprint: e.fingerprint, Token: e.token, Response: r.view}
}
