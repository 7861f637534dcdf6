// Package interop holds tests, and only tests, of saferetry with HTTP clients
// and routers written elsewhere: stripe-go, go-retryablehttp (through
// saferetryablehttp), chi, echo, and net/http's own HTTP/2. Each test makes a
// network lose or refuse an answer, then checks from the server's own count
// that the operation ran once and that the client got the stored answer.
//
// Those modules are imported by this package's _test.go files alone: they are
// test dependencies of the saferetry module and are never compiled into a
// program that imports saferetry (go list -deps github.com/saferetry/saferetry/...
// names none of them).
//
// The echo tests also pin down a trap for echo users: a handler's returned
// error is rendered by echo after a middleware wrapped with echo.WrapMiddleware
// has returned, so idempotency.Middleware would record an empty 200 in place of
// the error. Example_echo shows the cure: an echo middleware inside the wrapped
// one that renders the error with c.Error and returns nil.
package interop
