package saferetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// body hands out the request body for each attempt of one operation, the
// same bytes every time.
type body struct {
	req        *http.Request
	first      io.ReadCloser // the body of attempt 1, or nil
	buf        []byte        // the buffered body, when buffered
	buffered   bool
	replayable bool
	used       bool // attempt 1 took first
}

// newBody prepares req's body. A body with GetBody is replayed through it;
// one without is buffered up to limit bytes; a larger one is streamed once
// and marks the operation as not replayable. The buffering ends with the
// request's context: a done context closes req.Body and returns its error,
// as net/http gives up on a body it is sending. On error req.Body is
// closed. It returns a value, so that the body lives inside its operation
// and costs no allocation of its own.
func newBody(req *http.Request, limit int64) (body, error) {
	b := body{req: req, first: req.Body, replayable: true}
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		return b, nil
	}
	switch rb := req.Body.(type) {
	case failedBody: // Client.Do's buffering failed (see redirectableBody)
		return body{}, rb.err
	case *prefixedBody: // Client.Do found it too large to buffer
		b.replayable = false
		return b, nil
	}
	buf, err := readPrefix(req, limit+1)
	if err != nil {
		req.Body.Close()
		return body{}, fmt.Errorf("saferetry: read request body: %w", err)
	}
	if int64(len(buf)) <= limit {
		if err := req.Body.Close(); err != nil {
			return body{}, fmt.Errorf("saferetry: close request body: %w", err)
		}
		b.buf, b.buffered, b.first = buf, true, nil
		return b, nil
	}
	b.replayable = false
	b.first = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), req.Body), c: req.Body}
	return b, nil
}

// readPrefix reads up to n bytes of req's body, giving up when req's
// context ends: a slow or stalled producer (a pipe, a streaming upload)
// must not hold the operation past its deadline. The read then goes on in
// its goroutine until the caller's Close of the body ends it.
func readPrefix(req *http.Request, n int64) ([]byte, error) {
	ctx := req.Context()
	if ctx.Done() == nil {
		return io.ReadAll(io.LimitReader(req.Body, n))
	}
	type result struct {
		buf []byte
		err error
	}
	// The read takes the body now: once readPrefix gave up, the caller of
	// newBody may write req.Body (see redirectableBody).
	done, rb := make(chan result, 1), req.Body
	go func() {
		buf, err := io.ReadAll(io.LimitReader(rb, n))
		done <- result{buf, err}
	}()
	select {
	case r := <-done:
		return r.buf, r.err
	case <-ctx.Done():
		return nil, retrypolicy.ContextErr(ctx)
	}
}

// next returns the body for the coming attempt. Attempt 1 gets the
// request's own body; later ones get a fresh copy.
func (b *body) next() (io.ReadCloser, error) {
	switch {
	case b.buffered:
		return io.NopCloser(bytes.NewReader(b.buf)), nil
	case !b.used:
		b.used = true
		return b.first, nil
	case b.first == nil || b.first == http.NoBody:
		return b.first, nil
	case !b.replayable || b.req.GetBody == nil:
		return nil, errors.New("saferetry: request body cannot be replayed")
	}
	rc, err := b.req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("saferetry: GetBody: %w", err)
	}
	return rc, nil
}

// apply sets an attempt request's body fields.
func (b *body) apply(r *http.Request, rc io.ReadCloser) {
	r.Body = rc
	if b.buffered {
		r.ContentLength = int64(len(b.buf))
		buf := b.buf
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	}
}

// closeUnused closes the request's own body when no attempt took it.
func (b *body) closeUnused() {
	if !b.used && b.first != nil && !b.buffered {
		b.used = true
		b.first.Close()
	}
}

// prefixedBody streams the bytes read while probing the size, then the
// rest of the original body.
type prefixedBody struct {
	io.Reader
	c io.Closer
}

func (p *prefixedBody) Close() error { return p.c.Close() }

// redirectableBody buffers the body of req, a request that [Client.Do]
// hands to net/http, when it has no GetBody, as the Transport would for
// its attempts: net/http follows a 307 or 308 only when the request has
// GetBody, and returns the redirect as the answer otherwise, though the
// operation never ran. A body over limit stays as it is, and so does the
// redirect. The Transport takes what redirectableBody did over, without
// reading the body again: a buffered body has GetBody, a body found too
// large or whose reading failed is marked so. A timeout above zero (the
// http.Client's Timeout) bounds the buffering, as net/http's deadline
// bounds the Transport's, which reads the body under it.
func redirectableBody(req *http.Request, limit int64, timeout time.Duration) {
	r := req
	if timeout > 0 {
		ctx, cancel := context.WithTimeout(req.Context(), timeout)
		defer cancel()
		r = req.WithContext(ctx) // newBody reads r's body under r's context
	}
	b, err := newBody(r, limit)
	switch {
	case err != nil:
		req.Body = failedBody{err}
	case b.buffered:
		rc, _ := b.next()
		b.apply(req, rc)
	default:
		req.Body = b.first
	}
}

// failedBody stands for a request body whose buffering failed (see
// redirectableBody): newBody returns its error, as if it had read it.
type failedBody struct{ err error }

func (f failedBody) Read([]byte) (int, error) { return 0, f.err }
func (failedBody) Close() error               { return nil }

// cancelOnClose ends an attempt's context when the caller closes the final
// response body, which must stay readable until then.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// cancelOnCloseWriter keeps a writable body writable, as net/http's body
// of a 101 Switching Protocols response must be.
type cancelOnCloseWriter struct {
	cancelOnClose
	io.Writer
}

// withCancel wraps body so that closing it calls cancel.
func withCancel(body io.ReadCloser, cancel func()) io.ReadCloser {
	c := cancelOnClose{ReadCloser: body, cancel: cancel}
	if w, ok := body.(io.Writer); ok {
		return &cancelOnCloseWriter{cancelOnClose: c, Writer: w}
	}
	return &c
}

// drainLimit is how long the drain of a retried answer may go on before
// its body is closed under the read: long enough for an error body the
// server is sending to arrive, so that the connection can be reused; a
// body that stalls longer is worth less than a new connection.
const drainLimit = time.Second

// drainAnswer drains body, that of a retried answer, in a goroutine of its
// own, and returns a channel closed once that drain and the earlier ones
// (earlier, nil for none) are over. The drain reads a little of the body
// and closes it (see retrypolicy.Drain); a read that has not returned
// after drainLimit on clk (the server sent the header, then nothing) is
// ended by closing the body beside it, which net/http's bodies allow (the
// connection is dropped): with no context to end it (no deadline, no
// attempt timeout), the drain, its goroutine and its connection would
// otherwise be held for as long as the server keeps the body open. One
// read that Close does not end: that of the gzip header of an answer
// net/http decompresses (Content-Encoding: gzip, the request having no
// Accept-Encoding), whose Close waits for the read; only the attempt's
// context, or the server, ends that drain, and the Close waits with it.
func drainAnswer(clk clock.Clock, body io.ReadCloser, earlier <-chan struct{}) chan struct{} {
	done, rc := make(chan struct{}), &onceCloser{ReadCloser: body}
	cut := clk.AfterFunc(drainLimit, func() { rc.Close() })
	go func() {
		retrypolicy.Drain(rc)
		cut.Stop()
		if earlier != nil {
			<-earlier
		}
		close(done)
	}()
	return done
}

// onceCloser closes its body once, whoever calls Close first (see
// drainAnswer).
type onceCloser struct {
	io.ReadCloser
	once sync.Once
}

func (c *onceCloser) Close() error {
	c.once.Do(func() { c.ReadCloser.Close() })
	return nil
}
