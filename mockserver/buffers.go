package mockserver

import (
	"io"
	"net/http"
	"sync"
)

// buffers holds the byte slices that POST /payments reads its body into
// and appends its answer into; neither outlives the request.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledBuffer bounds the buffers kept for reuse: one that grew larger
// (a large body) is left to the collector.
const maxPooledBuffer = 64 << 10

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		*b = (*b)[:0]
		buffers.Put(b)
	}
}

// appendAll is io.ReadAll(io.LimitReader(r, n)), appending to b.
func appendAll(b []byte, r io.Reader, n int64) ([]byte, error) {
	lr := io.LimitedReader{R: r, N: n}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append choose the new capacity
		}
		m, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
}

// bufferedLen is the length of what is left of r's body when it is
// already in memory, as a body the idempotency Middleware read and put
// back (a reader with Len), or -1. It sizes the buffer a large body is
// read into at once, rather than grown by doubling, each step a copy and
// garbage. The Content-Length a client sends is not taken: a body that
// never comes would reserve it.
func bufferedLen(r *http.Request) int64 {
	if l, ok := r.Body.(interface{ Len() int }); ok {
		return int64(l.Len())
	}
	return -1
}
