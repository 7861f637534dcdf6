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
//   - the base took a connection (httptrace's GotConn, [Written.Trace]):
//     it reaches net/http through any base that keeps the request's
//     context, and costs a trace in that context (two allocations);
//   - the base asked for the body again through the attempt's GetBody
//     ([Written.GetBody]): net/http's own Transport does so only after it
//     read (wrote) some of the body or closed it, and its HTTP/2 on any
//     retry of a request with a body. This sign is read only where it
//     holds: for an attempt with a body sent straight to an
//     [*http.Transport] ([ReadsGetBody]). A base in between may send a
//     body and a GetBody of its own, which net/http would ask instead.
//
// Both signs only ever add "maybe sent": a base that calls GetBody for
// another reason, or takes a connection and writes nothing, turns a
// refused dial into an outcome unknown, the safe side.
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
// connection. Call it once per Written: the trace takes in the hooks of a
// trace already in ctx, and a second call would take them in twice.
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

// HasBody reports whether r has a body to send.
func HasBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }

// ReadsGetBody reports whether base is net/http's own Transport, to which
// an attempt's GetBody is a sign that it wrote some of the body (see
// [Written]).
func ReadsGetBody(base http.RoundTripper) bool {
	_, ok := base.(*http.Transport)
	return ok
}
