package retrypolicy

import (
	"context"
	"fmt"
	"io"
	"net/http/httptrace"
	"sync/atomic"
)

// Written records whether the base RoundTripper may have written some of
// an attempt's request, for an attempt that ends in an error which alone
// says that nothing was sent (a refused dial, see [Sent]). net/http resends
// a request that carries an Idempotency-Key on a new connection by itself
// when a reused one fails, and the error it then returns is the new
// connection's: a refused dial can follow a request that the server
// executed. The sign is that the base took a connection (httptrace's
// GotConn, through [Written.Trace]).
//
// It also records the converse, for an attempt whose error does not show
// that nothing was sent: a dial that the context or the attempt timeout
// ended (the context's error), a CONNECT that the proxy refused (its
// status text) or dropped, a TLS handshake that failed (an EOF, a reset,
// an alert). net/http and its HTTP/2 transport report GetConn before they
// look for a connection and GotConn as soon as they have one, before any
// of the request is written to it: an attempt that reported GetConn and
// no GotConn wrote nothing (see [Written.NoConn]).
//
// The trace travels in the request's context, so it reaches net/http
// through any base that keeps that context, whatever that base does to
// the body: a base that reads the body and sends a copy with a GetBody of
// its own, a protocol registered in an [http.Transport] with
// RegisterProtocol. The request's own GetBody is no such sign: net/http
// calls it on its resend only when the request reaches net/http as it is
// (a cheaper sign, tried and given up, because of those bases). A taken
// connection only ever adds "maybe sent": a base that takes one and writes
// nothing turns a refused dial into an outcome unknown, the safe side. A
// base that reports no GotConn leaves the classification to the error.
//
// A Written is itself the context that [Written.Trace] returns: when the
// context it is given holds no trace yet, the trace costs no allocation
// but its two hooks'. Being the context of every attempt of its operation,
// and so of the Request of the answer the operation returns, it also
// keeps the reason of the operation's last decision (see
// [Written.SetReason]), for whoever holds that answer.
//
// The zero Written is ready to use and must not be copied after its first
// use. It is safe for concurrent use: the base may report from goroutines
// of its own.
type Written struct {
	// Context is the context given to Trace, which w passes the keys it
	// does not answer to (and, when httptrace's key could not be learnt,
	// that context with the trace composed into it: see Parent).
	context.Context
	flag   atomic.Bool   // GotConn: the base took a connection
	asked  atomic.Bool   // GetConn: the base looked for a connection
	reason atomic.Uint32 // the last decision's Reason: it fills what asked leaves of a word
	trace  httptrace.ClientTrace
}

// CallKey is the context key under which saferetry's Client keeps the
// state of a Client.Do call. A Written hides it: the context that Trace
// returns shows no value under it, so that requests made on that context
// (by hooks, or later on a response's context) see none.
type CallKey struct{}

// Reset forgets what an earlier attempt reported, before the next is sent.
func (w *Written) Reset() {
	w.flag.Store(false)
	w.asked.Store(false)
}

// SetReason records r, the reason of the operation's last decision.
func (w *Written) SetReason(r Reason) { w.reason.Store(uint32(r)) }

// Reason returns the reason SetReason recorded last, 0 before the first.
// It may be called from any goroutine.
func (w *Written) Reason() Reason { return Reason(w.reason.Load()) }

// Load reports whether the base took a connection since the last Reset.
func (w *Written) Load() bool { return w.flag.Load() }

// NoConn reports whether, since the last Reset, the base looked for a
// connection and took none: none of the attempt was written, whatever
// error ended it. A base that reports neither leaves it false.
func (w *Written) NoConn() bool { return w.asked.Load() && !w.flag.Load() }

// Trace returns ctx with a client trace that marks w when the base looks
// for a connection and when it takes one. Call it once per Written: the
// trace takes in the hooks of a trace already in ctx, and a second call
// would take them in twice.
//
// What it returns is w itself, which answers the key of httptrace's
// context value (see traceKey) with its trace. When ctx holds a trace
// already, [httptrace.WithClientTrace] composes that trace's hooks into
// w's, at the price of an allocation; the context it returns is not
// kept: what it holds beyond ctx is the composed trace, which w answers
// with, and the net package's dial hooks, which it makes of the same
// hooks as those ctx holds already (w adds none).
func (w *Written) Trace(ctx context.Context) context.Context {
	w.trace.GetConn = func(string) { w.asked.Store(true) }
	w.trace.GotConn = func(httptrace.GotConnInfo) { w.flag.Store(true) }
	w.Context = ctx
	switch {
	case traceKey == nil:
		w.Context = &tracedContext{httptrace.WithClientTrace(ctx, &w.trace), ctx}
	case httptrace.ContextClientTrace(ctx) != nil:
		httptrace.WithClientTrace(ctx, &w.trace)
	}
	return w
}

// tracedContext is the context a Written passes keys to when httptrace's
// key could not be learnt: the given context (parent) with the trace
// composed into it.
type tracedContext struct {
	context.Context
	parent context.Context
}

// Value returns w itself for the key of [Of], w's trace for httptrace's
// key, nil for [CallKey], and what w's Context holds for any other key.
func (w *Written) Value(key any) any {
	switch key.(type) { // not ==, which calls the runtime's efaceeq
	case writtenKey:
		return w
	case CallKey:
		return nil
	}
	if traceKey != nil && key == traceKey {
		return &w.trace
	}
	return w.Context.Value(key)
}

// writtenKey is the key of the innermost Written in a context.
type writtenKey struct{}

// Of returns the innermost Written in ctx (the operation an attempt's
// context belongs to), or nil.
func Of(ctx context.Context) *Written {
	w, _ := ctx.Value(writtenKey{}).(*Written)
	return w
}

// Parent returns the context given to Trace.
func (w *Written) Parent() context.Context {
	if t, ok := w.Context.(*tracedContext); ok {
		return t.parent
	}
	return w.Context
}

// String names the context for debugging, after its parent, as the
// context package's own contexts do.
func (w *Written) String() string { return ContextName(w.Parent()) + ".WithClientTrace(saferetry)" }

// ContextName names ctx for debugging, as the context package names a
// parent: its String when it has one, else its type.
func ContextName(ctx context.Context) string {
	if s, ok := ctx.(fmt.Stringer); ok {
		return s.String()
	}
	if ctx == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%T", ctx)
}

// Format prints String for every verb, so that fmt never reads w's fields
// (%#v would read the mark while the base's hook sets it).
func (w *Written) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, w.String()) }

// traceKey is the key under which httptrace looks for a client trace in a
// context, nil if it could not be learnt. httptrace keeps its key type
// unexported; the key is learnt by asking [httptrace.ContextClientTrace]
// to look in a context that records what it is asked for.
var traceKey = func() any {
	var p keyProbe
	httptrace.ContextClientTrace(&p)
	return p.key
}()

// keyProbe is a context that records the last key it was asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}
