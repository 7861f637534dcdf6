// Package otelidempotency measures the idempotency middleware with
// OpenTelemetry metrics: what it did with each protected request, how long
// the store calls and the handler took, how many claims are held and how
// many duplicates wait. It depends on the OpenTelemetry API only; the
// application picks the SDK and the exporter (the Prometheus exporter gives
// the names in the table below). The idempotency package and its stores do
// not import OpenTelemetry: without this package, nothing is measured and
// nothing is paid for.
//
// Wire the three parts into one Middleware:
//
//	inst := otelidempotency.New(otelidempotency.WithMeterProvider(mp))
//	mw := idempotency.Middleware(inst.WrapStore(store, "redis"),
//		idempotency.WithHook(inst.Hook()))
//	http.Handle("POST /payments", mw(inst.Handler(createPayment)))
//
// Hook counts outcomes, WrapStore times store calls (and counts waiters),
// Handler times the handler inside the Middleware (and counts the claims
// held). Each works without the others.
//
// # Instruments
//
//	instrument                          kind           unit       attributes                                          Prometheus (OpenTelemetry exporter)
//	saferetry.server.requests           counter        {request}  outcome, method, route, status_code                 saferetry_server_requests_total
//	saferetry.server.request.duration   histogram      s          outcome, method, route, status_code                 saferetry_server_request_duration_seconds
//	saferetry.server.handler.duration   histogram      s          method, route                                       saferetry_server_handler_duration_seconds
//	saferetry.server.store.duration     histogram      s          store.operation, store.name, error.type             saferetry_server_store_duration_seconds
//	saferetry.server.claims.active      updowncounter  {claim}    method, route                                       saferetry_server_claims_active
//	saferetry.server.waiters.active     updowncounter  {request}  store.name                                          saferetry_server_waiters_active
//	saferetry.server.takeovers          counter        {takeover} method, route                                       saferetry_server_takeovers_total
//	saferetry.server.retries (opt-in)   counter        {request}  scope, outcome                                      saferetry_server_retries_total
//
// The attributes are named short here: outcome is saferetry.outcome,
// method http.request.method, route http.route, status_code
// http.response.status_code, store.* saferetry.store.*, scope
// saferetry.scope (the Attributes table below). The Prometheus exporter
// turns the dots of names into underscores, adds the unit (_seconds) and
// _total to counters, and labels each series with the attributes the same
// way (saferetry_outcome="replay").
//
// saferetry.server.requests counts every event of the Middleware: one per
// protected request that carries a key or lacks a required one.
// saferetry.server.request.duration is the event's Duration, from admission
// to the outcome, waits and store calls included; answers given on
// admission (missing_key, malformed_key, too_large, bad_request,
// scope_error) are counted but not timed. saferetry.server.takeovers counts
// the requests whose claim was taken over from a holder whose lease had
// lapsed (its instance died or stalled): each one is a possible second run
// of the operation. saferetry.server.waiters.active counts the duplicates
// that wait (idempotency.WithWaitForResult) with a store watch; a store
// without idempotency.Watcher has its waiters poll, and they are not counted.
//
// # Attributes
//
//	attribute                   values                                                      on
//	saferetry.outcome           new (ran and stored), released (ran, a 5xx, 307, 308, 408,  requests, request.duration, retries
//	                            429 or a panic: not stored, a retry runs again), replay, in_progress
//	                            (409), mismatch (422, key reused), lease_lost, store_error,
//	                            declined (the store declined the claim: the handler answered
//	                            without one, nothing stored), too_large, oversize (410),
//	                            missing_key, malformed_key, bad_request, scope_error: the
//	                            idempotency.Outcome values
//	http.request.method         the request's method                                        requests, request.duration, handler.duration, claims.active, takeovers
//	http.route                  the path of the ServeMux pattern matched (Request.Pattern,  same
//	                            without method and host, as otelhttp gives it); absent
//	                            when the Middleware wraps the mux, except on
//	                            handler.duration and claims.active when Handler wraps
//	                            a route's handler inside the mux, where the pattern is known
//	http.response.status_code   the status sent; absent when none was (a panic before the   requests, request.duration
//	                            response streamed, or fail-open handing the request on)
//	saferetry.store.operation   claim, renew, complete, release, get, watch, begin_tx,      store.duration
//	                            commit, rollback (a Tx's claim and complete are claim and
//	                            complete)
//	saferetry.store.name        the name given to WrapStore                                 store.duration, waiters.active
//	error.type                  stale_token, not_storable, claim_declined (a claim that     store.duration, on failed calls only
//	                            idempotency.ErrClaimDeclined declined), canceled,
//	                            deadline_exceeded, _OTHER
//	saferetry.scope             the label WithRetriesByScope makes of the scope             retries
//
// No attribute carries the Idempotency-Key, whose values are unbounded. A
// panic shows as released (declined, when the handler ran without a
// claim because the store declined it) without a status code, unless the
// response had begun to stream (it outgrew what the Middleware records):
// then with the status that went out.
//
// # Retries as analytics
//
// The server sees a client's retries of one operation as the requests that
// find its key: replay (the first answer was lost on the way back: a
// timeout, a dropped connection), in_progress (the retry came while the
// first still ran: a client timeout shorter than the handler, or an
// eager duplicate) and oversize (idempotency.Event.Repeat tells them). An
// in_progress answered to a request that found the key free and claimed
// it itself, too late to run the handler (its claim came back with under
// half its lease left), is no retry and is not counted as one; one that
// found the key held, waited for it (idempotency.WithWaitForResult) and
// then claimed it too late is. With WithRetriesByScope they are counted
// per scope in saferetry.server.retries, so that
//
//	sum by (saferetry_scope, saferetry_outcome) (rate(saferetry_server_retries_total[5m]))
//
// reads as each tenant's retries per second, by kind, and
//
//	sum(rate(saferetry_server_retries_total[5m]))
//	  / sum(rate(saferetry_server_requests_total{saferetry_outcome="new"}[5m]))
//
// as retries per executed operation over all tenants (saferetry.server.requests
// has no scope attribute, so the ratio per tenant is not one query; in
// Prometheus the attribute names become labels with underscores:
// saferetry_scope, saferetry_outcome, http_route). A high replay share points at answers
// lost after the work was done; a high in_progress share at clients that
// retry before the server is done (compare with
// saferetry.server.handler.duration). A retry after a released answer (a
// 5xx) claims the key anew and counts as new: the server cannot tell it
// from a first attempt. The scope is opt-in because every scope label is a
// series of its own: WithRetriesByScope takes a function that maps scopes to
// a bounded set.
//
// # Traces
//
// Hook puts the outcome on the request's span, the one in the request's
// context when it reached the Middleware (otelhttp's, say), as the
// attribute saferetry.outcome, and saferetry.took_over=true on a takeover;
// its measurements carry the request's context, so exemplars link to the
// trace.
package otelidempotency
