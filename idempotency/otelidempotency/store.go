package otelidempotency

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/otelkit"
)

// The values of saferetry.store.operation: the Store, Watcher, TxStore and
// Tx methods, a Tx's Claim and Complete named like the Store's.
const (
	opClaim = iota
	opRenew
	opComplete
	opRelease
	opGet
	opWatch
	opBeginTx
	opCommit
	opRollback
	numOps
)

var opNames = [numOps]string{"claim", "renew", "complete", "release", "get", "watch", "begin_tx", "commit", "rollback"}

// WrapStore returns s with every call timed into
// saferetry.server.store.duration, labelled with the operation and with
// name as saferetry.store.name (say "redis" or "orders-pg": a name per
// store, not per key), and with error.type when the call failed. When s
// also implements idempotency.Watcher, so does the returned store, and each
// watch a waiting request holds counts in saferetry.server.waiters.active;
// when s implements idempotency.TxStore, so does the returned store, its
// transactions timed too (a Tx's Context is s's, so the store's accessor,
// such as pgstore.TxFromContext, keeps working). Other methods of s (Close,
// CreateSchema, ...) are not on the returned store: keep s for those.
//
// Give the Middleware the returned store. It is safe for concurrent use as
// s is.
func (in *Instrumentation) WrapStore(s idempotency.Store, name string) idempotency.Store {
	st := &store{next: s, in: in, storeName: name}
	for op := range numOps {
		st.ok[op] = otelkit.NewOpts(attrStoreOp.String(opNames[op]), attrStoreName.String(name))
	}
	st.name = otelkit.NewOpts(attrStoreName.String(name))
	w, watches := s.(idempotency.Watcher)
	txs, tx := s.(idempotency.TxStore)
	switch {
	case watches && tx:
		return struct {
			*store
			watcher
			txStarter
		}{st, watcher{w, st}, txStarter{txs, st}}
	case watches:
		return struct {
			*store
			watcher
		}{st, watcher{w, st}}
	case tx:
		return struct {
			*store
			txStarter
		}{st, txStarter{txs, st}}
	}
	return st
}

// store times the calls of the Store it wraps.
type store struct {
	next      idempotency.Store
	in        *Instrumentation
	storeName string
	ok        [numOps]otelkit.Opts // the attributes of a call of each operation that succeeded
	name      otelkit.Opts         // the store's name alone, for the waiters
}

var _ idempotency.Store = (*store)(nil)

// done records the call of op that began at began and ended with err.
func (s *store) done(ctx context.Context, op int, began time.Time, err error) {
	d := time.Since(began).Seconds()
	if err == nil {
		s.in.storeDuration.Record(ctx, d, s.ok[op].Rec...)
		return
	}
	// Failures are rare enough to make their attribute set each time.
	s.in.storeDuration.Record(ctx, d, otelkit.NewOpts(
		attrStoreOp.String(opNames[op]), attrStoreName.String(s.storeName), attrErrorType.String(errorType(err))).Rec...)
}

func (s *store) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	began := time.Now()
	res, err := s.next.Claim(ctx, k, fp, lease, ttl)
	s.done(ctx, opClaim, began, err)
	return res, err
}

func (s *store) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	began := time.Now()
	err := s.next.Renew(ctx, k, token, lease)
	s.done(ctx, opRenew, began, err)
	return err
}

func (s *store) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	began := time.Now()
	err := s.next.Complete(ctx, k, token, resp, ttl)
	s.done(ctx, opComplete, began, err)
	return err
}

func (s *store) Release(ctx context.Context, k idempotency.Key, token int64) error {
	began := time.Now()
	err := s.next.Release(ctx, k, token)
	s.done(ctx, opRelease, began, err)
	return err
}

func (s *store) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	began := time.Now()
	e, found, err := s.next.Get(ctx, k)
	s.done(ctx, opGet, began, err)
	return e, found, err
}

// watcher times the Watch of the store it wraps and counts the watches
// held.
type watcher struct {
	next idempotency.Watcher
	s    *store
}

func (w watcher) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	began := time.Now()
	settled, stop, err := w.next.Watch(ctx, k)
	w.s.done(ctx, opWatch, began, err)
	if err != nil {
		return settled, stop, err
	}
	waiters, o := w.s.in.waitersActive, w.s.name
	waiters.Add(ctx, 1, o.Add...)
	var stopped atomic.Bool
	return settled, func() {
		if stopped.CompareAndSwap(false, true) {
			waiters.Add(context.WithoutCancel(ctx), -1, o.Add...)
		}
		stop()
	}, nil
}

// txStarter times BeginTx and the transactions of the TxStore it wraps.
type txStarter struct {
	next idempotency.TxStore
	s    *store
}

func (t txStarter) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	began := time.Now()
	tx, err := t.next.BeginTx(ctx)
	t.s.done(ctx, opBeginTx, began, err)
	if err != nil {
		return tx, err
	}
	return &timedTx{next: tx, s: t.s}, nil
}

// timedTx times the calls of one transaction. Like the Tx it wraps, it is
// used by one goroutine at a time.
type timedTx struct {
	next idempotency.Tx
	s    *store
}

func (t *timedTx) Context(ctx context.Context) context.Context { return t.next.Context(ctx) }

func (t *timedTx) Claim(ctx context.Context, k idempotency.Key, fp string, ttl time.Duration) (idempotency.ClaimResult, error) {
	began := time.Now()
	res, err := t.next.Claim(ctx, k, fp, ttl)
	t.s.done(ctx, opClaim, began, err)
	return res, err
}

func (t *timedTx) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	began := time.Now()
	err := t.next.Complete(ctx, k, token, resp, ttl)
	t.s.done(ctx, opComplete, began, err)
	return err
}

func (t *timedTx) Commit(ctx context.Context) error {
	began := time.Now()
	err := t.next.Commit(ctx)
	t.s.done(ctx, opCommit, began, err)
	return err
}

func (t *timedTx) Rollback(ctx context.Context) error {
	began := time.Now()
	err := t.next.Rollback(ctx)
	t.s.done(ctx, opRollback, began, err)
	return err
}

// errorType is the error.type of a failed store call: the contract's
// sentinels by name, the context's ends, "_OTHER" for the rest (an
// unreachable store, mostly), as the semantic conventions advise for an
// open set of causes.
func errorType(err error) string {
	switch {
	case errors.Is(err, idempotency.ErrStaleToken):
		return "stale_token"
	case errors.Is(err, idempotency.ErrResponseNotStorable):
		return "not_storable"
	case errors.Is(err, idempotency.ErrClaimDeclined):
		return "claim_declined"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "_OTHER"
}
