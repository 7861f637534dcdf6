package retrypolicy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// Written records whether the base RoundTripper may have written some of
// an attempt's request, for an attempt that ends in an error which alone
// says that nothing was sent (a refused dial, see [Sent]). net/http resends
// a request that carries an Idempotency-Key on a new connection by itself
// when a reused one fails, and the error it then returns is the new
// connection's: a refused dial can follow a request that the server
// executed. Two signs tell that the first connection may have carried it:
//
//   - for a request with a body, the base asks for the body again through
//     GetBody ([Written.GetBody]): net/http does so only after it read
//     (wrote) some of the body or closed it, HTTP/2 after it wrote some;
//   - for a request without a body, the base took a connection (httptrace's
//     GotConn, [Written.Trace]), which costs a trace in the context: two
//     allocations the request with a body does without.
//
// Both signs only ever add "maybe sent": a base that calls GetBody for
// another reason, or takes a connection and writes nothing, turns a
// refused dial into an outcome unknown, the safe side. A base that shows
// neither sign leaves the classification to the error alone.
//
// The zero Written is ready to use and must not be copied after its first
// use. It is safe for concurrent use: the base may report from goroutines
// of its own.
type Written struct {
	flag  atomic.Bool
	trace httptrace.ClientTrace
}

// Reset forgets what an earlier attempt reported, before the next is sent.
func (w *Written) Reset() { w.flag.Store(false) }

// Load reports whether the base showed, since the last Reset, that it may
// have written some of the request.
func (w *Written) Load() bool { return w.flag.Load() }

// Mark records that the base may have written some of the request.
func (w *Written) Mark() { w.flag.Store(true) }

// Trace returns ctx with a client trace that marks w when the base takes a
// connection: the sign for a request without a body (see [HasBody]).
func (w *Written) Trace(ctx context.Context) context.Context {
	w.trace.GotConn = func(httptrace.GotConnInfo) { w.Mark() }
	return httptrace.WithClientTrace(ctx, &w.trace)
}

// GetBody returns a GetBody for an attempt's request that marks w, then
// returns getBody's body: the sign for a request with a body.
func (w *Written) GetBody(getBody func() (io.ReadCloser, error)) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		w.Mark()
		return getBody()
	}
}

// HasBody reports whether r has a body to send, so that its GetBody is the
// sign [Written] reads, not a trace.
func HasBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }
