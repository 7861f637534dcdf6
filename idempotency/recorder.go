package idempotency

import (
	"maps"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// recorder is the ResponseWriter the handler writes to while the Middleware
// holds its claim. It buffers the status and body so that the outcome can be
// stored before the client sees it. The handler's headers go straight into
// the real writer's header map, which nothing has sent yet; the Middleware
// clears it when it answers with a problem instead.
//
// When the body grows past limit and streaming is allowed, the recorder
// stops buffering: it sends the header, what it buffered and everything
// after straight to the client, and the outcome is stored as oversize.
//
// Through http.ResponseController it passes SetReadDeadline and
// SetWriteDeadline on to the writer underneath: they bound the connection,
// not the recorded answer. It refuses Flush and Hijack (they would send
// what is not recorded yet, or take the connection from under the record)
// and EnableFullDuplex (the Middleware read the request body before the
// handler ran); it is no http.Flusher, http.Hijacker or http.Pusher, and it
// has no Unwrap method, which would let ResponseController reach past it.
// Declared trailers go out as trailers of the first answer only: stores
// keep no trailers.
type recorder struct {
	w         http.ResponseWriter
	status    int
	buf       []byte
	limit     int
	canStream bool
	streaming bool // headers and buffered body were sent to w
	oversize  bool // the body outgrew limit
}

var _ http.ResponseWriter = (*recorder)(nil)

func (r *recorder) Header() http.Header { return r.w.Header() }

// SetReadDeadline sets the read deadline of the connection underneath, as
// http.ResponseController.SetReadDeadline does.
func (r *recorder) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(r.w).SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline of the connection underneath, as
// http.ResponseController.SetWriteDeadline does. The buffered answer is
// written after the handler returns, so a deadline that passes before then
// loses it for this client; it is stored all the same.
func (r *recorder) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(r.w).SetWriteDeadline(t)
}

// WriteHeader records the first final status. Informational (1xx) statuses
// are dropped: the real response has not started yet.
func (r *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("idempotency: invalid WriteHeader code")
	}
	if r.status != 0 || code < 200 {
		return
	}
	r.status = code
}

// Write buffers p. Like net/http's own writer, it refuses a body after a
// status that has none (204, 304), but takes an empty one.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.status == http.StatusNoContent || r.status == http.StatusNotModified {
		return 0, http.ErrBodyNotAllowed
	}
	if r.streaming {
		return r.w.Write(p)
	}
	if !r.oversize && len(r.buf)+len(p) > r.limit {
		r.oversize = true
		if r.canStream {
			r.streaming = true
			r.w.WriteHeader(r.status)
			if len(r.buf) > 0 {
				if _, err := r.w.Write(r.buf); err != nil {
					r.buf = nil
					return 0, err
				}
			}
			r.buf = nil
			return r.w.Write(p)
		}
	}
	r.buf = append(r.buf, p...)
	return len(p), nil
}

// statusCode returns the status the handler set, 200 if it wrote nothing.
func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// unsent reports that nothing of the response reached the client yet.
func (r *recorder) unsent() bool { return !r.streaming }

// flush sends the buffered response, unless it was streamed already.
// The values of declared trailers are kept out of the header section and
// put back after the body, where net/http's writer sends them as
// trailers: the handler set them after its body, as trailers are set, but
// before the buffered answer went out.
func (r *recorder) flush() {
	if r.streaming {
		return
	}
	trailers := takeTrailers(r.w.Header())
	r.w.WriteHeader(r.statusCode())
	// Reading the header map after WriteHeader makes net/http's writer
	// take its copy of the header section, without the trailers.
	h := r.w.Header()
	if len(r.buf) > 0 {
		_, _ = r.w.Write(r.buf)
	}
	maps.Copy(h, trailers)
}

// takeTrailers removes from h, and returns, the fields that h declares as
// trailers (named in its Trailer header), as net/http's writer takes them:
// by canonical name, and only names that may be trailers.
func takeTrailers(h http.Header) http.Header {
	var out http.Header
	for _, v := range h["Trailer"] {
		for name := range strings.SplitSeq(v, ",") {
			k := http.CanonicalHeaderKey(textproto.TrimString(name))
			vv, ok := h[k]
			if !ok || !validTrailer(k) {
				continue
			}
			if out == nil {
				out = make(http.Header)
			}
			out[k] = vv
			delete(h, k)
		}
	}
	return out
}

// validTrailer reports whether net/http's writer sends the canonical field
// name k as a declared trailer: the fields RFC 9110 (section 6.5.1) keeps
// out of trailers, those that frame, route, authenticate or qualify the
// message (If-*), are never sent after the body.
func validTrailer(k string) bool {
	if strings.HasPrefix(k, "If-") {
		return false
	}
	switch k {
	case "Authorization", "Cache-Control", "Connection", "Content-Encoding", "Content-Length", "Content-Range",
		"Content-Type", "Expect", "Host", "Keep-Alive", "Max-Forwards", "Pragma", "Proxy-Authenticate",
		"Proxy-Authorization", "Proxy-Connection", "Range", "Realm", "Te", "Trailer", "Transfer-Encoding",
		"Www-Authenticate":
		return false
	}
	return true
}
