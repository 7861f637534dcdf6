package saferetry

import (
	"context"
	"net/http"
	"sync/atomic"
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

	// state tells a RoundTrip whether it is a hop of this call (see
	// enter). The call's context reaches further than its hops: into
	// every attempt's request, which hooks and the response carry.
	state atomic.Int32
}

// The states of a call.
const (
	callIdle int32 = iota // between hops
	callBusy              // a hop's RoundTrip runs
	callOver              // Do has returned
)

// enter reports whether a RoundTrip that finds c in its request's context
// is a hop of the call, and makes c busy if so; the hop calls leave when
// it ends. The hops of a call run one after the other, during Do. A
// RoundTrip that finds c busy runs inside a hop (a request sent from a
// hook on the attempt's context), and one that finds c over was sent on a
// context taken from the call after it ended (from its response): each
// is an operation of its own, which must neither send the call's pinned
// key nor overwrite what the call ended with.
func (c *callContext) enter() bool { return c.state.CompareAndSwap(callIdle, callBusy) }

// leave ends a hop that enter let in.
func (c *callContext) leave() { c.state.Store(callIdle) }

// callCtxKey finds the callContext of a request's context.
type callCtxKey struct{}

// Value implements context.Context.
func (c *callContext) Value(key any) any {
	if key == (callCtxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// hopOf returns the callContext of ctx when the request of ctx is a hop of
// that call (see enter), or nil; the hop must then call leave.
func hopOf(ctx context.Context) *callContext {
	c, _ := ctx.Value(callCtxKey{}).(*callContext)
	if c == nil || !c.enter() {
		return nil
	}
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
