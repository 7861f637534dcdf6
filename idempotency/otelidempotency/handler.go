package otelidempotency

import (
	"net/http"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// Handler wraps the handler that an idempotency.Middleware protects, inside
// it, and measures its runs under a claim: saferetry.server.claims.active
// counts the runs in progress, saferetry.server.handler.duration records how
// long each took (also a run that panicked), by method and route.
//
//	mw := idempotency.Middleware(store, idempotency.WithHook(inst.Hook()))
//	h := mw(inst.Handler(app))
//
// A request without a claim (an unprotected method, no key when none is
// required, fail-open after a store failure, a claim that the store
// declined) passes through unmeasured.
// The returned handler is safe for concurrent use if next is.
func (in *Instrumentation) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, held := idempotency.KeyFromContext(r.Context()); !held {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		o := in.routes.Get(routeAttrs{r.Method, r.Pattern}, routeAttrs.opts)
		in.claimsActive.Add(ctx, 1, o.Add...)
		began := time.Now()
		defer func() {
			in.handlerDuration.Record(ctx, time.Since(began).Seconds(), o.Rec...)
			in.claimsActive.Add(ctx, -1, o.Add...)
		}()
		next.ServeHTTP(w, r)
	})
}
