package saferetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// callContext is the context of one [Client.Do] call, for every RoundTrip
// of it (one per redirect hop): the key pinned for the call and the
// results the Transport hands back. It is a context of its own rather
// than a context.WithValue with a pointer in it, so that the call costs
// one allocation, not two, and holds the text of its generated key and
// the request Do hands net/http (first). Its
// results are written by its hops alone, which run one after the other;
// other requests that carry it only look at hop, which is atomic.
type callContext struct {
	context.Context

	// text is the key generated up front for the whole call, when pinned
	// (see pinnedKey). Unlike a key from [WithKey] it is used only for
	// methods that would get a generated key, so that a 303 turning a
	// POST into a GET does not send the POST's key with the GET.
	text keyText
	// reason is the reason of the last operation's last decision: one
	// byte, which fits beside text with pinned, so that the call stays in
	// its size class (see TestCallContextSizeClass).
	reason retrypolicy.Reason
	pinned bool // text holds the call's key

	// What else the last operation of the call ended with.
	attempts int
	key      string
	err      *Error // the operation's error when it got no response

	// t is the Client's Transport: only its RoundTrips are the call's hops.
	t *Transport
	// hop tells a RoundTrip whether it is the call's next hop (see enter):
	// the response that hop follows (nil, or the Response of Do's request,
	// for the first), hopBusy while a hop runs, hopOver once the call is
	// over. The call's context reaches further than its hops: into every
	// attempt's request of a hop whose context was made from it (net/http
	// makes one for its Timeout, a RoundTripper around the Transport may),
	// which hooks and the response carry, and into the request that
	// CheckRedirect is given. One word, so that a request is
	// let in by one compare-and-swap against what the last hop left.
	hop atomic.Pointer[http.Response]
	// first is the request Do hands net/http: req with the call as its
	// context (see Client.Do). It lives in the call, so that the two cost
	// one allocation, not two. Whatever keeps the request keeps the call,
	// as when it was an allocation of its own; what keeps the call (a
	// generated key's text, a context net/http made from it) now keeps the
	// request too, whose body, header and URL the hops' attempts, copies
	// of it, hold anyway.
	first http.Request
	// answer is the response the last hop returned, from its end until
	// the next hop enters: net/http holds its body open meanwhile, while
	// it runs the caller's code (the Jar's SetCookies, CheckRedirect, the
	// request's GetBody for the next hop's body) and until it closes it
	// to follow it. Written by the hops, read by Do when net/http's Do
	// does not return (see end). (A RoundTripper around the Transport that
	// panics before the next hop enters gets it closed twice, which
	// net/http's bodies allow.)
	answer *http.Response
}

// pinnedKey returns the key generated up front for the whole call (its
// text, not a copy), or "".
func (c *callContext) pinnedKey() string {
	if !c.pinned {
		return ""
	}
	return c.text.string()
}

// keptKey returns key for what may keep it after the call (an error):
// a copy when it is the text of the call's generated key, which would
// keep the call, and with it the last answer and the request body it
// holds, for as long as the key is kept. Only errors copy it: a response
// keeps the call anyway, through its attempts' header.
func (c *callContext) keptKey(key string) string {
	if key != "" && unsafe.StringData(key) == &c.text[0] {
		return strings.Clone(key)
	}
	return key
}

// The sentinels of callContext.hop.
var (
	hopBusy = new(http.Response)
	hopOver = new(http.Response)
)

// enter reports whether req, sent through t with c in its context, is the
// call's next hop, and makes c busy if so; the hop calls leave when it
// ends. net/http sends the hops of a redirect one after the other through
// the Client's Transport, each with the response the previous one
// returned as its Response. Any other request that carries c is an
// operation of its own, which must neither send the call's pinned key
// nor overwrite what the call ended with: one built on the context of an
// attempt (from a hook, at once or from a goroutine it started) or of the
// call's response, which hides the call (retrypolicy.CallKey) when it
// carries it at all (see Transport.RoundTrip); one built on the context
// of the request CheckRedirect is given; one sent during a hop; one sent
// after the call. (A copy of the very request that CheckRedirect is
// given, sent before that hop, is taken for the hop.)
func (c *callContext) enter(t *Transport, req *http.Request) bool {
	if c.t != t || !c.hop.CompareAndSwap(req.Response, hopBusy) {
		return false
	}
	c.answer = nil // net/http closed it before sending this hop
	return true
}

// leave ends a hop that enter let in: followed is the Response the hop
// followed, resp what it returned. A hop that returned no response may be
// sent again (by a RoundTripper around the Transport that retries), as
// the same hop: it gets the call's key again.
func (c *callContext) leave(followed, resp *http.Response) {
	next := resp
	if resp == nil {
		next = followed
	}
	c.answer = resp
	c.hop.CompareAndSwap(hopBusy, next)
}

// end marks the call over, when Do returns. panicked says that net/http's
// Do did not return: a panic goes through Do, from the caller's code
// (CheckRedirect, the Jar, GetBody) or the Transport's. The panic goes on
// to the caller as it is, but the answer of the last hop, which net/http
// held open while that code ran, is closed first, so that a caller that
// recovers (net/http's server does, for a handler) is not left with a
// connection held for good. (A panic out of the Transport leaves no such
// answer: it closes its own, and a hop that ends without a response
// leaves none.)
func (c *callContext) end(panicked bool) {
	c.hop.Store(hopOver)
	if panicked && c.answer != nil {
		c.answer.Body.Close()
	}
}

// String names the context for debugging, after its parent; Format prints
// it for every verb, so that fmt reads none of the call's fields (its key
// among them) while a hop writes them.
func (c *callContext) String() string {
	return retrypolicy.ContextName(c.Context) + ".WithValue(saferetry.Client.Do call)"
}

// Format implements fmt.Formatter; see String.
func (c *callContext) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// callCtxKey finds the callContext of a request's context. The attempts'
// contexts (retrypolicy.Written) hide it.
type callCtxKey = retrypolicy.CallKey

// Value implements context.Context. A type assertion, not ==: comparing
// an interface to a zero-size struct calls the runtime's efaceeq.
func (c *callContext) Value(key any) any {
	if _, ok := key.(callCtxKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// hopOf returns the callContext in req's context when req, sent through
// t, is a hop of that call (see enter), or nil; the hop must then call
// leave.
func hopOf(t *Transport, req *http.Request) *callContext {
	c, _ := req.Context().Value(callCtxKey{}).(*callContext)
	if c == nil || !c.enter(t, req) {
		return nil
	}
	return c
}

// newCall starts the context of a Client.Do of req. It generates the key
// of the logical operation up front, for a request that would otherwise
// get one generated per RoundTrip, so that every hop of a 307/308 redirect
// (each a separate RoundTrip) carries the same key.
func (c *config) newCall(t *Transport, req *http.Request) (*callContext, error) {
	ctx := req.Context()
	call := &callContext{Context: ctx, t: t}
	if req.Response != nil { // a request made from an earlier one's
		call.hop.Store(req.Response)
	}
	if len(req.Header[HeaderIdempotencyKey]) > 0 || !c.keyMethods.Has(req.Method) {
		return call, nil
	}
	if _, ok := KeyFromContext(ctx); ok {
		return call, nil
	}
	if err := call.text.generate(); err != nil {
		return nil, &Error{Cause: ErrNotSent, Err: err}
	}
	call.pinned = true
	return call, nil
}
