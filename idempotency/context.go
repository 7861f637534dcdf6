package idempotency

import "context"

type claimCtxKey struct{}

// claimCtx is the handler's context: the request's own, carrying the claim
// it runs under. It lives in the request's flight, which saves the
// allocation of a context.WithValue. Deriving from it stays as cheap as
// deriving from the request's context: Done and the context package's own
// lookups go through to the embedded context.
type claimCtx struct {
	context.Context
	key   Key
	token int64
}

// Value returns c itself for claimCtxKey, and the request context's value
// for any other key.
func (c *claimCtx) Value(key any) any {
	if _, ok := key.(claimCtxKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// TokenFromContext returns the fencing token of the claim under which the
// handler runs, and whether there is one. The token grows with each takeover
// of the key, so a handler can pass it downstream as a fencing token (a
// database write that applies only when no greater token wrote first) to
// let a newer holder's writes win over a stale one's. It is no key: an
// outgoing call keyed with it is, to the other service, a new operation on
// every takeover, and runs there once per run; key such calls with
// DerivedKey, the same on every run.
func TokenFromContext(ctx context.Context) (int64, bool) {
	if c, ok := ctx.Value(claimCtxKey{}).(*claimCtx); ok {
		return c.token, true
	}
	return 0, false
}

// KeyFromContext returns the Idempotency-Key of the claim under which the
// handler runs, and whether there is one (saferetry.KeyFromContext is its
// client-side twin). ScopedKeyFromContext gives the scope too.
func KeyFromContext(ctx context.Context) (string, bool) {
	if c, ok := ctx.Value(claimCtxKey{}).(*claimCtx); ok {
		return c.key.Key, true
	}
	return "", false
}

// ScopedKeyFromContext returns the scope and Idempotency-Key of the claim
// under which the handler runs, and whether there is one.
func ScopedKeyFromContext(ctx context.Context) (Key, bool) {
	if c, ok := ctx.Value(claimCtxKey{}).(*claimCtx); ok {
		return c.key, true
	}
	return Key{}, false
}

type probeCtxKey struct{}

// ProbeContext returns a copy of ctx that marks the store calls made with
// it, or with a context derived from it, as a probe: a Claim made to see
// what holds a key, which the caller rolls back (or releases) whatever it
// finds, not one that claims the key for a request. (mockserver looks up
// the key of a body it refuses so in transactional mode, where only a
// claim sees another transaction's claim in progress.) It changes no
// answer. A store that chooses its statements from what its claims found
// lately leaves a probe's claim out of those counts, which are the
// requests': pgstore's TxStore does, for its replay and insert fast paths.
func ProbeContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, probeCtxKey{}, true)
}

// IsProbe reports whether ctx was marked by ProbeContext, or derives from
// a context that was.
func IsProbe(ctx context.Context) bool {
	probe, _ := ctx.Value(probeCtxKey{}).(bool)
	return probe
}
