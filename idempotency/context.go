package idempotency

import "context"

type claimCtxKey struct{}

type claimInfo struct {
	key   Key
	token int64
}

func withClaim(ctx context.Context, k Key, token int64) context.Context {
	return context.WithValue(ctx, claimCtxKey{}, claimInfo{key: k, token: token})
}

// TokenFromContext returns the fencing token of the claim under which the
// handler runs, and whether there is one. The token grows with each takeover
// of the key, so a handler can pass it downstream (for instance as part of
// the key of its own outgoing calls, or as a fencing token for a database
// write) to let a newer holder's writes win over a stale one's.
func TokenFromContext(ctx context.Context) (int64, bool) {
	ci, ok := ctx.Value(claimCtxKey{}).(claimInfo)
	return ci.token, ok
}

// KeyFromContext returns the scope and Idempotency-Key of the claim under
// which the handler runs, and whether there is one.
func KeyFromContext(ctx context.Context) (Key, bool) {
	ci, ok := ctx.Value(claimCtxKey{}).(claimInfo)
	return ci.key, ok
}
