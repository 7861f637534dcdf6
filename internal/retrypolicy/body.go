package retrypolicy

import (
	"io"
	"net/http"
)

// CloseBody closes req's body, if it has one: a RoundTripper closes the
// body of a request it does not send, as it would one it sends.
func CloseBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// Drain reads a little of a response body that nobody else will read (an
// intermediate answer, one beside an error) and closes it, so that the
// connection can be reused without reading an unbounded body. rc may be
// nil.
func Drain(rc io.ReadCloser) {
	if rc == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, rc, 4<<10)
	rc.Close()
}

// HasBody reports whether r has a body to send.
func HasBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }
