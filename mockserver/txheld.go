package mockserver

import (
	"context"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// probeFingerprint is the fingerprint of probe's claim, which no request
// has (the Middleware's are hex digests), so that the claim never matches
// a record's.
const probeFingerprint = "mockserver: probe of a refused body's key"

// probe looks k up in transactional mode, where an entry is a committed
// record, or a claim in progress, a row not yet committed that Store.Get
// does not see: it claims k in a transaction of its own, which it rolls
// back whatever it found, so it runs, stores and keeps nothing, and takes
// nothing over (a transactional claim has no lease). Its claim waits for
// a row in progress (up to the store's lock timeout, as the Middleware's
// does): it finds the record when that row commits, acquires the key
// when it rolls back (the key is free then), or is answered in progress,
// with probeFingerprint, when the wait times out. It returns the claim's
// answer: Acquired when k is free, else the entry in the way. ttl is the
// idempotency TTL. Its calls are marked as a probe's
// (idempotency.ProbeContext), which a store leaves out of the counts it
// keeps of its requests' claims (pgstore's fast paths).
func probe(ctx context.Context, st idempotency.TxStore, k idempotency.Key, ttl time.Duration) (idempotency.ClaimResult, error) {
	ctx = idempotency.ProbeContext(ctx)
	tx, err := st.BeginTx(ctx)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return tx.Claim(ctx, k, probeFingerprint, ttl)
}

// txRefusalGuard is refusalGuard's twin in transactional mode: the
// TxStore that the idempotency Middleware is given, its store but for a
// request that requireJSON refuses and passes on (marked by refusing),
// whose transaction is a refusedTx, which claims nothing.
//
// It is safe for concurrent use, as its store is.
type txRefusalGuard struct{ idempotency.TxStore }

func (g txRefusalGuard) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	if rf := refusalOf(ctx); rf != nil {
		return refusedTx{g.TxStore, rf}, nil
	}
	return g.TxStore.BeginTx(ctx)
}

// refusedTx is the transaction of a refused request, which holds nothing.
// Its Claim answers, the first time, from the entry that requireJSON's
// probe found, so that a claim in progress is waited for once, up to the
// store's lock timeout, not once more by the Middleware's claim; and
// after that (the Middleware claims again after waiting, under
// idempotency.WithWaitForResult, or requireJSON's probe failed) from a
// probe of its own. It answers as a Claim refused by the entry found (the
// Middleware answers the request from it: replayed, 422, or 409 in
// progress), fails as the probe failed, or, the key found free, declines
// the claim (see refusal.decline). The in-progress entry of a probe whose
// wait timed out is answered with the request's fingerprint, as the
// Middleware's own claim would be answered after its wait: in progress,
// whoever holds the key.
type refusedTx struct {
	st idempotency.TxStore
	rf *refusal
}

func (t refusedTx) Claim(ctx context.Context, k idempotency.Key, fingerprint string, ttl time.Duration) (idempotency.ClaimResult, error) {
	var res idempotency.ClaimResult
	if e := t.rf.probed; e != nil {
		t.rf.probed = nil // a claim again, after a wait, looks again
		res.Entry = *e
	} else {
		var err error
		if res, err = probe(ctx, t.st, k, ttl); err != nil {
			return idempotency.ClaimResult{}, err
		}
		if res.Acquired {
			return idempotency.ClaimResult{}, t.rf.decline()
		}
	}
	if res.Entry.Fingerprint == probeFingerprint {
		res.Entry.Fingerprint = fingerprint
	}
	return res, nil
}

// Context returns ctx: there is no transaction for the handler, which a
// refused request's never gets (its claim is never acquired).
func (refusedTx) Context(ctx context.Context) context.Context { return ctx }

// Complete changes nothing: there is no claim to complete.
func (refusedTx) Complete(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
	return idempotency.ErrStaleToken
}

// Commit and Rollback have nothing to end.
func (refusedTx) Commit(context.Context) error   { return nil }
func (refusedTx) Rollback(context.Context) error { return nil }
