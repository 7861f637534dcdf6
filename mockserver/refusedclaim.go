package mockserver

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// refusedKey is the context key that marks a request which requireJSON
// refuses and passes on to the idempotency Middleware (see refusing). Its
// value is the *refusal.
type refusedKey struct{}

// refusal is why requireJSON refuses a request it passes on: the reasons
// that refuseMediaType is given.
type refusal struct{ typeWhy, codingWhy string }

// refusing returns r marked for refusalGuard and refuseUnderClaim, with
// why its body is refused (see refusals): its key is answered from its
// record, never claimed, and it is never run as a payment, whatever its
// headers become meanwhile (a handler middleware may change them).
func refusing(r *http.Request, typeWhy, codingWhy string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), refusedKey{}, &refusal{typeWhy, codingWhy}))
}

// refusalOf returns the refusal that ctx was marked with (see refusing),
// nil when it was not.
func refusalOf(ctx context.Context) *refusal {
	rf, _ := ctx.Value(refusedKey{}).(*refusal)
	return rf
}

// phantomToken is the fencing token of the claim that refusalGuard gives
// a refused request without claiming anything. A store may issue it too
// (the Store contract only has tokens grow), so refusalGuard tells the
// phantom claim by the request's mark, never by its token.
const phantomToken = math.MinInt64

// refused reports whether ctx is the context of a request marked by
// refusing, or derived from it, as the contexts of the Middleware's store
// calls for that request are: such a request holds no claim but the
// phantom one.
func refused(ctx context.Context) bool { return refusalOf(ctx) != nil }

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
// requireJSON looked) is given a phantom claim, with phantomToken, which
// holds nothing in the store: the handler runs under it (refuseUnderClaim
// answers 503, which is not stored) and its Renew and Release change
// nothing. A request that the Middleware may run, unmarked, is claimed in
// the store as it is.
//
// It is safe for concurrent use, as its store is.
type refusalGuard struct{ idempotency.Store }

// guardRefused returns st in a refusalGuard, with st's Watcher, when it has
// one, so that a waiter is woken when the entry settles.
func guardRefused(st idempotency.Store) idempotency.Store {
	g := refusalGuard{st}
	if w, ok := st.(idempotency.Watcher); ok {
		return struct {
			refusalGuard
			idempotency.Watcher
		}{g, w}
	}
	return g
}

func (g refusalGuard) Claim(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if !refused(ctx) {
		return g.Store.Claim(ctx, k, fingerprint, lease, ttl)
	}
	switch e, found, err := g.Store.Get(ctx, k); {
	case err != nil:
		return idempotency.ClaimResult{}, err
	case found:
		return idempotency.ClaimResult{Entry: e}, nil
	}
	return idempotency.ClaimResult{Acquired: true, Token: phantomToken, LeaseRemaining: lease}, nil
}

func (g refusalGuard) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if refused(ctx) {
		return nil
	}
	return g.Store.Renew(ctx, k, token, lease)
}

func (g refusalGuard) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if refused(ctx) {
		return idempotency.ErrStaleToken // the phantom claim holds nothing to complete
	}
	return g.Store.Complete(ctx, k, token, resp, ttl)
}

func (g refusalGuard) Release(ctx context.Context, k idempotency.Key, token int64) error {
	if refused(ctx) {
		return nil
	}
	return g.Store.Release(ctx, k, token)
}
