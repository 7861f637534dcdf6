package mockserver

import (
	"context"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// probeFingerprint is the fingerprint of txHeld's claim, which no request
// has (the Middleware's are hex digests), so that the claim never matches
// a record's.
const probeFingerprint = "mockserver: probe of a refused body's key"

// txHeld reports whether, in transactional mode, an entry holds k: a
// committed record, or a claim in progress, a row not yet committed that
// Store.Get does not see; or whether it could not tell (held, with the
// error). It claims k
// in a transaction of its own, which it rolls back whatever it found, so
// it runs, stores and keeps nothing, and takes nothing over (a
// transactional claim has no lease). Its claim waits for a row in
// progress (up to the store's lock timeout, as the Middleware's does): it
// finds the record when that row commits, acquires the key when it rolls
// back (the key is free then), or is answered in progress. ttl is the
// idempotency TTL.
func txHeld(ctx context.Context, st idempotency.TxStore, k idempotency.Key, ttl time.Duration) (bool, error) {
	tx, err := st.BeginTx(ctx)
	if err != nil {
		return true, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := tx.Claim(ctx, k, probeFingerprint, ttl)
	return err != nil || !res.Acquired, err
}
