package idempotency

import "context"

type claimCtxKey struct{}

type claimInfo struct {
	key   Key
	token int64
}

// withClaim returns ctx carrying ci, which must not change afterwards.
func withClaim(ctx context.Context, ci *claimInfo) context.Context {
	return context.WithValue(ctx, claimCtxKey{}, ci)
}

// TokenFromContext returns the fencing token of the claim under which the
// handler runs, and whether there is one. The token grows with each takeover
// of the key, so a handler can pass it downstream (for instance as part of
// the key of its own outgoing calls, or as a fencing token for a database
// write) to let a newer holder's writes win over a stale one's.
func TokenFromContext(ctx context.Context) (int64, bool) {
	if ci, ok := ctx.Value(claimCtxKey{}).(*claimInfo); ok {
		return ci.token, true
	}
	return 0, false
}

// KeyFromContext returns the scope and Idempotency-Key of the claim under
// which the handler runs, and whether there is one.
func KeyFromContext(ctx context.Context) (Key, bool) {
	if ci, ok := ctx.Value(claimCtxKey{}).(*claimInfo); ok {
		return ci.key, true
	}
	return Key{}, false
}
