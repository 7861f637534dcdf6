package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

var _ idempotency.Store = (*Store)(nil)

// errNonPositive is returned by Claim, Renew and Complete when a lease or ttl
// is not positive: such an entry would be lapsed or expired at birth.
var errNonPositive = errors.New("memstore: lease and ttl must be positive")

const shardCount = 64

// Store is an in-memory idempotency.Store for single-instance applications
// and tests. Create it with New; the zero value is not usable. It is safe for
// concurrent use by multiple goroutines. Call Close when done to stop the
// background sweep.
//
// Fencing tokens come from one store-wide counter, so they grow per key even
// across Release and expiry.
type Store struct {
	shards [shardCount]shard
	tokens atomic.Int64
	now    func() time.Time

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type shard struct {
	mu  sync.Mutex
	m   map[idempotency.Key]*entry
	exp expiryHeap // every expiry ever set in m, soonest first; see sweepExpired
}

// sweepBatch bounds how many expiries the sweep handles per hold of a shard
// lock, so that requests on the shard wait for at most one batch.
const sweepBatch = 256

// entry is the stored form of an idempotency.Entry with absolute times.
type entry struct {
	state       idempotency.State
	fingerprint string
	token       int64
	leaseUntil  time.Time // in progress only
	expiresAt   time.Time
	queued      int64                 // the time of the entry's item in the shard's expiry heap, in Unix nanoseconds
	resp        *idempotency.Response // completed only; owned by the store
}

// New returns an empty Store. Unless WithCleanupInterval is given a value
// of zero or less, it starts one goroutine that sweeps expired entries; Close
// stops it.
func New(opts ...Option) *Store {
	c := config{now: time.Now, interval: DefaultCleanupInterval}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	s := &Store{now: c.now, stop: make(chan struct{}), done: make(chan struct{})}
	for i := range s.shards {
		s.shards[i].m = make(map[idempotency.Key]*entry)
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

// sweepExpired pops up to limit due expiries from the shard's heap. Each
// entry has one heap item, pushed when the entry is created; when an item
// comes due for an entry whose expiry was pushed back since (Complete, a
// takeover), it goes back into the heap at the new time instead of the entry
// being deleted. Items of entries that are gone (released, dropped lazily)
// are discarded. It reports how many entries it removed, how many heap items
// it examined, and whether due items remain.
func (sh *shard) sweepExpired(now time.Time, limit int) (removed, examined int, more bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := now.UnixNano()
	for examined < limit && len(sh.exp) > 0 && sh.exp[0].at <= at {
		it := sh.exp.pop()
		examined++
		e, ok := sh.m[it.key]
		switch {
		case !ok || e.queued != it.at:
			// The entry is gone, or is a later one under the same key
			// with an item of its own.
		case !now.Before(e.expiresAt):
			delete(sh.m, it.key)
			removed++
		default:
			sh.queue(it.key, e)
		}
	}
	return removed, examined, len(sh.exp) > 0 && sh.exp[0].at <= at
}

// expireAt moves e's expiry to at. A later expiry needs no new heap item:
// the sweep re-queues the entry when its item comes due. An earlier one
// does, or the entry would outstay its expiry in memory. The shard lock must
// be held.
func (sh *shard) expireAt(k idempotency.Key, e *entry, at time.Time) {
	e.expiresAt = at
	if at.UnixNano() < e.queued {
		sh.queue(k, e)
	}
}

// queue records e's current expiry in the shard's heap. The shard lock must
// be held.
func (sh *shard) queue(k idempotency.Key, e *entry) {
	e.queued = e.expiresAt.UnixNano()
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
func (sh *shard) live(k idempotency.Key, now time.Time) *entry {
	e, ok := sh.m[k]
	if !ok {
		return nil
	}
	if !now.Before(e.expiresAt) {
		delete(sh.m, k)
		return nil
	}
	return e
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	return nil
}

// Claim implements idempotency.Store.
func (s *Store) Claim(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if err := ctxErr(ctx); err != nil {
		return idempotency.ClaimResult{}, err
	}
	if lease <= 0 || ttl <= 0 {
		return idempotency.ClaimResult{}, errNonPositive
	}
	sh := s.shardFor(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	e := sh.live(k, now)
	switch {
	case e == nil:
		e = &entry{state: idempotency.StateInProgress, fingerprint: fingerprint}
		sh.m[k] = e
		e.token = s.tokens.Add(1)
		e.leaseUntil = now.Add(lease)
		e.expiresAt = now.Add(ttl)
		sh.queue(k, e)
		return idempotency.ClaimResult{Acquired: true, Token: e.token}, nil
	case e.fingerprint == fingerprint && e.state == idempotency.StateInProgress && !now.Before(e.leaseUntil):
		e.token = s.tokens.Add(1)
		e.leaseUntil = now.Add(lease)
		sh.expireAt(k, e, now.Add(ttl))
		return idempotency.ClaimResult{Acquired: true, Token: e.token, TookOver: true}, nil
	default:
		return idempotency.ClaimResult{Entry: e.export(now)}, nil
	}
}

// withHeld runs update on the entry of k under its shard's lock when token
// holds its claim, and returns ErrStaleToken otherwise. now is the store's
// clock read once under the lock.
func (s *Store) withHeld(k idempotency.Key, token int64, update func(sh *shard, e *entry, now time.Time)) error {
	sh := s.shardFor(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	e := sh.live(k, now)
	if e == nil || e.state != idempotency.StateInProgress || e.token != token {
		return idempotency.ErrStaleToken
	}
	update(sh, e, now)
	return nil
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
	return s.withHeld(k, token, func(sh *shard, e *entry, now time.Time) {
		e.leaseUntil = now.Add(lease)
		if e.expiresAt.Before(e.leaseUntil) {
			// A holder still renewing outlives the ttl: the entry must not
			// expire under it, or a duplicate would acquire the key anew.
			sh.expireAt(k, e, e.leaseUntil)
		}
	})
}

// Complete implements idempotency.Store. It keeps a deep copy of resp.
func (s *Store) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if ttl <= 0 {
		return errNonPositive
	}
	return s.withHeld(k, token, func(sh *shard, e *entry, now time.Time) {
		e.state = idempotency.StateCompleted
		e.leaseUntil = time.Time{}
		sh.expireAt(k, e, now.Add(ttl))
		e.resp = copyResponse(&resp)
	})
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, k idempotency.Key, token int64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return s.withHeld(k, token, func(sh *shard, _ *entry, _ time.Time) {
		delete(sh.m, k)
	})
}

// Get implements idempotency.Store. The returned Response is a copy the
// caller may modify.
func (s *Store) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return idempotency.Entry{}, false, err
	}
	sh := s.shardFor(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	e := sh.live(k, now)
	if e == nil {
		return idempotency.Entry{}, false, nil
	}
	return e.export(now), true, nil
}

// export returns the public view of e at now, with a copied Response.
func (e *entry) export(now time.Time) idempotency.Entry {
	out := idempotency.Entry{State: e.state, Fingerprint: e.fingerprint, Token: e.token}
	if e.state == idempotency.StateInProgress {
		out.LeaseRemaining = e.leaseUntil.Sub(now)
	}
	if e.resp != nil {
		out.Response = copyResponse(e.resp)
	}
	return out
}

func copyResponse(r *idempotency.Response) *idempotency.Response {
	return &idempotency.Response{
		Status:   r.Status,
		Header:   r.Header.Clone(),
		Body:     bytes.Clone(r.Body),
		Oversize: r.Oversize,
	}
}
