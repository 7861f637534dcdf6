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
// A Written is itself the context that [Written.Trace] returns, when the
// context it is given holds no trace yet: the trace then costs no
// allocation but its hook's.
//
// The zero Written is ready to use and must not be copied after its first
// use. It is safe for concurrent use: the base may report from goroutines
// of its own.
type Written struct {
	// Context is the context given to Trace, once Trace returned w.
	context.Context
	// Hide, when set before Trace, is a context key whose value in the
	// context given to Trace the returned context does not show: requests
	// made on it (by hooks, or later on a response's context) see none.
	Hide  any
	flag  atomic.Bool
	trace httptrace.ClientTrace
}

// Reset forgets what an earlier attempt reported, before the next is sent.
func (w *Written) Reset() { w.flag.Store(false) }

// Load reports whether the base took a connection since the last Reset.
func (w *Written) Load() bool { return w.flag.Load() }

// Trace returns ctx with a client trace that marks w when the base takes a
// connection. Call it once per Written: the trace takes in the hooks of a
// trace already in ctx, and a second call would take them in twice.
//
// What it returns is w itself when ctx holds no trace and the key of
// httptrace's context value is known (see traceKey): w answers that key
// with its trace and any other with ctx's value. Otherwise it is what
// [httptrace.WithClientTrace] returns, which composes the two traces.
func (w *Written) Trace(ctx context.Context) context.Context {
	w.trace.GotConn = func(httptrace.GotConnInfo) { w.flag.Store(true) }
	if traceKey == nil || httptrace.ContextClientTrace(ctx) != nil {
		ctx = httptrace.WithClientTrace(ctx, &w.trace)
		if w.Hide != nil {
			ctx = context.WithValue(ctx, w.Hide, nil)
		}
		return ctx
	}
	w.Context = ctx
	return w
}

// Value returns w's trace for httptrace's key, nil for w.Hide, and the
// value of the context given to Trace for any other key.
func (w *Written) Value(key any) any {
	switch {
	case key == traceKey:
		return &w.trace
	case w.Hide != nil && key == w.Hide:
		return nil
	}
	return w.Context.Value(key)
}

// String names the context for debugging, after its parent, as the
// context package's own contexts do.
func (w *Written) String() string {
	name := "<nil>"
	if s, ok := w.Context.(fmt.Stringer); ok {
		name = s.String()
	} else if w.Context != nil {
		name = fmt.Sprintf("%T", w.Context)
	}
	return name + ".WithClientTrace(saferetry)"
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
