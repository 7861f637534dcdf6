package mockserver

import (
	"context"
	"net/http"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// refusedKey is the context key that marks a request which requireJSON
// refuses and passes on to the idempotency Middleware (see refusing). Its
// value is the *refusal.
type refusedKey struct{}

// refusal is why requireJSON refuses a request it passes on: the reasons
// that refuseMediaType is given; and what became of its key's lookups.
// It is read and written on the request's goroutine only (the
// Middleware's store calls and its handler run there).
type refusal struct {
	typeWhy, codingWhy string
	// unlooked: requireJSON could not look the key up (the store or the
	// scope failed), and passed the request on as if it were held.
	unlooked bool
	// probed is, in transactional mode, the entry that requireJSON's probe
	// found, for the Middleware's first claim of the request to be
	// answered from (see refusedTx); nil when there was none, or once so
	// answered.
	probed *idempotency.Entry
	// declined: the Middleware's claim of the request found no entry of
	// its key, and was declined (see refusal.decline): the handler
	// answers it without a claim.
	declined bool
}

// decline notes that the Middleware's claim of the refused request found
// its key free, and returns the error that declines the claim: the
// Middleware runs the handler without one (see refuseUnderClaim).
func (rf *refusal) decline() error {
	rf.declined = true
	return idempotency.ErrClaimDeclined
}

// refusing returns r marked for refusalGuard and refuseUnderClaim with
// rf, why its body is refused (see refusals): its key is answered from its
// record, never claimed, and it is never run as a payment, whatever its
// headers become meanwhile (a handler middleware may change them).
func refusing(r *http.Request, rf *refusal) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), refusedKey{}, rf))
}

// refusalOf returns the refusal that ctx was marked with (see refusing),
// nil when it was not.
func refusalOf(ctx context.Context) *refusal {
	rf, _ := ctx.Value(refusedKey{}).(*refusal)
	return rf
}

// refusalGuard is the Store that the idempotency Middleware is given in
// lease mode: its store, but for a request that requireJSON refuses and
// passes on (marked by refusing), whose key it never claims. Its Claim
// then looks the key up, with the store's Get, which changes nothing, and
// answers as a Claim refused by the entry found: the Middleware answers
// the request from it (the stored answer replayed, 422 for another
// fingerprint, 409 in progress, or, under
// idempotency.WithWaitForResult, waits for it and looks again), and a
// claim in progress, its lease live or lapsed, is never taken over, so its
// holder, which may be paying, still records its outcome. A lookup that
// fails is the Claim's error (the Middleware answers 503, or, with
// idempotency.WithFailOpen, runs the handler without a claim). A key found
// in no entry (its record expired, or its holder released it, after
// requireJSON looked) declines the claim (idempotency.ErrClaimDeclined):
// the Middleware runs the handler without a claim, stores nothing of its
// answer (refuseUnderClaim answers 503), and reports it as declined. A
// request that the Middleware may run, unmarked, is claimed in the store
// as it is; so, a refused request never holding a claim, are the
// store's Renew, Complete and Release calls.
//
// It is safe for concurrent use, as its store is.
type refusalGuard struct{ idempotency.Store }

// guardRefused returns st in a refusalGuard, or, when st is a TxStore
// (transactional mode), in a txRefusalGuard, with st's Watcher, when it
// has one, so that a waiter is woken when the entry settles.
func guardRefused(st idempotency.Store) idempotency.Store {
	w, watches := st.(idempotency.Watcher)
	if txs, ok := st.(idempotency.TxStore); ok {
		g := txRefusalGuard{txs}
		if watches {
			return struct {
				txRefusalGuard
				idempotency.Watcher
			}{g, w}
		}
		return g
	}
	g := refusalGuard{st}
	if watches {
		return struct {
			refusalGuard
			idempotency.Watcher
		}{g, w}
	}
	return g
}

func (g refusalGuard) Claim(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	rf := refusalOf(ctx)
	if rf == nil {
		return g.Store.Claim(ctx, k, fingerprint, lease, ttl)
	}
	switch e, found, err := g.Store.Get(ctx, k); {
	case err != nil:
		return idempotency.ClaimResult{}, err
	case found:
		return idempotency.ClaimResult{Entry: e}, nil
	}
	return idempotency.ClaimResult{}, rf.decline()
}
