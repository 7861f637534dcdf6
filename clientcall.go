package saferetry

import (
	"context"
	"net/http"
)

// callContext is the context of one [Client.Do] call, for every RoundTrip
// of it (one per redirect hop): the key pinned for the call and the
// results the Transport hands back. It is a context of its own rather
// than a context.WithValue with a pointer in it, so that the call costs
// one allocation, not two, and holds the text of its generated key. A
// call is used by one goroutine at a time (the hops of a call run one
// after the other).
type callContext struct {
	context.Context

	// pinned is the key generated up front for the whole call, or "".
	// Unlike a key from [WithKey] it is used only for methods that would
	// get a generated key, so that a 303 turning a POST into a GET does
	// not send the POST's key with the GET.
	pinned string
	text   keyText // pinned's text, when pinned is a generated key

	// What the last operation of the call ended with.
	attempts int
	key      string
	err      *Error // the operation's error when it got no response
}

// callCtxKey finds the callContext of a request's context.
type callCtxKey struct{}

// Value implements context.Context.
func (c *callContext) Value(key any) any {
	if key == (callCtxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// callOf returns the callContext of ctx, or nil outside a Client.Do.
func callOf(ctx context.Context) *callContext {
	c, _ := ctx.Value(callCtxKey{}).(*callContext)
	return c
}

// newCall starts the context of a Client.Do of req. It generates the key
// of the logical operation up front, for a request that would otherwise
// get one generated per RoundTrip, so that every hop of a 307/308 redirect
// (each a separate RoundTrip) carries the same key.
func (c *config) newCall(req *http.Request) (*callContext, error) {
	ctx := req.Context()
	call := &callContext{Context: ctx}
	if len(req.Header[HeaderIdempotencyKey]) > 0 || !c.keyMethods.Has(req.Method) {
		return call, nil
	}
	if _, ok := KeyFromContext(ctx); ok {
		return call, nil
	}
	if err := call.text.generate(); err != nil {
		return nil, &Error{Cause: ErrNotSent, Err: err}
	}
	call.pinned = call.text.string()
	return call, nil
}
