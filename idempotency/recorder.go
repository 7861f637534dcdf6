package idempotency

import (
	"errors"
	"io"
	"iter"
	"maps"
	"net/http"
	"net/textproto"
	"strconv"
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
// Its ReadFrom hands what is left of its source to the writer underneath
// from then on, so that io.Copy from a file keeps net/http's sendfile path.
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
//
// A Content-Length the handler declares is taken, as net/http's writer
// takes it, when the status is set (at WriteHeader or the first Write):
// the first value of the field, when it parses as a length. A Write that
// would take the body past it returns http.ErrContentLength and takes
// nothing, and so does every later one, so that what is buffered, stored
// and replayed is what net/http would have sent. A Content-Length set or
// changed after the status does not count, as with net/http: the header
// goes out with the one the status was set with (see sendHeader).
type recorder struct {
	w     http.ResponseWriter
	buf   []byte
	limit int
	// length is the Content-Length declared when the status was set, -1
	// when none was or it did not parse; it is read only once status is.
	length int64
	// status is an int32 so that it shares a word with the flags below,
	// which keeps request in its size class (TestRequestSizes).
	status     int32
	canStream  bool
	streaming  bool // headers and buffered body were sent to w
	oversize   bool // the body outgrew limit
	overLength bool // a Write went past length: every later one is refused
}

var (
	_ http.ResponseWriter = (*recorder)(nil)
	_ io.ReaderFrom       = (*recorder)(nil)
)

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
	r.setStatus(code)
}

// setStatus sets the final status and takes the declared Content-Length,
// as net/http's writer does at that point: the one lookup the recorder
// makes of it while the handler writes.
func (r *recorder) setStatus(code int) {
	r.status = int32(code) // WriteHeader took it for at most 999
	r.length = declaredLength(r.w.Header())
}

// declaredLength returns the Content-Length that net/http's writer holds a
// body to under h: its first value, when it is a length; -1 otherwise
// (net/http drops such a field, and sends the body without it).
func declaredLength(h http.Header) int64 {
	v := h["Content-Length"]
	if len(v) == 0 {
		return -1
	}
	if n, ok := plainLength(v[0]); ok {
		return n
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// plainLength returns s as a length when it is 1 to 18 ASCII digits, too
// few to overflow, which strconv.ParseInt reads as the same number: the
// usual field, read without it. ok is false otherwise, for ParseInt to
// read (a sign, an overflow, no digits).
func plainLength(s string) (n int64, ok bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// sentLength returns the Content-Length that the header of the answer
// carries as flush sends it, -1 when none: the one its status was set
// with, or, when the handler wrote nothing, the one it left. It is read
// after the handler returned.
func (r *recorder) sentLength() int64 {
	if r.status == 0 {
		return declaredLength(r.w.Header())
	}
	return r.length
}

// notWhole reports whether the answer recorded reaches the client of req
// broken, as net/http's writer sends it (see flush): under a Content-Length
// that no client reads as one (several values that differ, or one with a
// sign, which net/http's writer takes and sends over HTTP/1), or, to a
// request other than HEAD, with fewer body bytes than the length declared,
// where net/http's writer ends the connection (HTTP/1) or the stream
// (HTTP/2) and the client reads a message cut short. Over HTTP/2 and later
// the writer sends the first value alone, and none when it is not digits
// only: the body is then framed without it, and reaches the client whole.
// Such an answer is not replayed: a replay would pass off as good an
// answer that its first client never got whole. It is read after the
// handler returned and before flush, and looks at the field as sendHeader
// leaves it.
func (r *recorder) notWhole(req *http.Request) bool {
	if r.streaming {
		return false // not recorded: the answer is oversize
	}
	h := r.w.Header()
	length := r.sentLength()
	status := r.statusCode()
	if length < 0 || status == http.StatusNoContent || status == http.StatusNotModified {
		return false // no length is sent (net/http's writer drops it for these)
	}
	// By its canonical name, as net/http's writer reads it (Header.Get).
	if te := h["Transfer-Encoding"]; len(te) > 0 && te[0] != "" && te[0] != "identity" {
		return false // net/http's writer drops the length and sends the body chunked
	}
	// The field goes out as the handler left it, unless sendHeader
	// rewrites it as the one length sent: then only the body can fall
	// short of it.
	if v := h["Content-Length"]; declaredLength(h) == length {
		_, plain := plainLength(v[0])
		signed := !plain && strings.Trim(v[0], "0123456789") != ""
		switch {
		case req.ProtoMajor >= 2 && signed:
			return false // not sent: the body is framed without it
		case req.ProtoMajor < 2 && (signed || differing(v)):
			return true
		}
	}
	return req.Method != http.MethodHead && int64(len(r.buf)) < length
}

// differing reports whether the Content-Length values v differ, which no
// client reads as a length.
func differing(v []string) bool {
	for _, x := range v[1:] {
		if textproto.TrimString(x) != textproto.TrimString(v[0]) {
			return true
		}
	}
	return false
}

// Write buffers p. Like net/http's own writer, it refuses a body after a
// status that has none (204, 304), but takes an empty one, and it refuses
// p, whole, when it would take the body past the declared Content-Length.
// Once streaming, it leaves that to the writer underneath, which got the
// same length with the header.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.setStatus(http.StatusOK)
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
	if r.length >= 0 && (r.overLength || int64(len(r.buf))+int64(len(p)) > r.length) {
		// net/http counts the refused bytes as written, so that no later
		// Write fits either.
		r.overLength = true
		return 0, http.ErrContentLength
	}
	if !r.oversize && len(r.buf)+len(p) > r.limit {
		r.oversize = true
		if r.canStream {
			r.streaming = true
			r.sendHeader()
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

// ReadFrom takes src's bytes as Write takes them, until the answer streams
// (see Write): from then on nothing of it is recorded, and it hands the
// rest of src to the writer underneath, whose own ReadFrom (net/http's
// writer has one) may send a file without copying it through memory. So
// io.Copy from an *os.File into the recorder keeps net/http's sendfile
// path for an answer too large to record.
func (r *recorder) ReadFrom(src io.Reader) (n int64, err error) {
	if !r.streaming {
		n, err = io.Copy(untilStreaming{r}, src)
		if err != errStreaming {
			return n, err
		}
	}
	m, err := io.Copy(r.w, src)
	return n + m, err
}

// errStreaming ends the part of a ReadFrom that the recorder takes (see
// untilStreaming).
var errStreaming = errors.New("idempotency: the answer streams")

// untilStreaming writes to the recorder, and stops the io.Copy that calls
// it once the answer streams, by returning errStreaming with the bytes
// taken. It has no ReadFrom, so that io.Copy reads into a buffer of its
// own, sized as it sizes them.
type untilStreaming struct{ r *recorder }

func (u untilStreaming) Write(p []byte) (int, error) {
	n, err := u.r.Write(p)
	if err == nil && u.r.streaming {
		err = errStreaming
	}
	return n, err
}

// statusCode returns the status the handler set, 200 if it wrote nothing.
func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return int(r.status)
}

// unsent reports that nothing of the response reached the client yet.
func (r *recorder) unsent() bool { return !r.streaming }

// flush sends the buffered response, unless it was streamed already,
// under the Content-Length its status was set with (see sendHeader).
// The values of declared trailers are kept out of the header section and
// put back after the body, where net/http's writer sends them as
// trailers: the handler set them after its body, as trailers are set, but
// before the buffered answer went out.
func (r *recorder) flush() {
	if r.streaming {
		return
	}
	trailers := takeTrailers(r.w.Header())
	if r.status == 0 {
		// The handler wrote nothing: its Content-Length, if any, is the
		// one it left, which net/http's writer takes now, as it would
		// have when the handler returned.
		r.w.WriteHeader(http.StatusOK)
	} else {
		r.sendHeader()
	}
	// Reading the header map after WriteHeader makes net/http's writer
	// take its copy of the header section, without the trailers.
	h := r.w.Header()
	if len(r.buf) > 0 {
		_, _ = r.w.Write(r.buf)
	}
	maps.Copy(h, trailers)
}

// sendHeader sends the status the handler set, with a header whose
// Content-Length is the one it was set with: net/http's writer sends, and
// holds the body to, the field as it was at WriteHeader, but the recorder
// sends the header later, after the handler may have set, changed or
// removed it. A field that was no length then and is none now is left for
// net/http's writer to drop. This is the second and last lookup of the
// field; the status was set (r.status is not 0).
func (r *recorder) sendHeader() {
	h := r.w.Header()
	if _, ok := h["Content-Length"]; ok || r.length >= 0 {
		switch now := declaredLength(h); {
		case now == r.length:
		case r.length < 0:
			delete(h, "Content-Length")
		default:
			h["Content-Length"] = []string{strconv.FormatInt(r.length, 10)}
		}
	}
	r.w.WriteHeader(int(r.status))
}

// takeTrailers removes from h, and returns, the fields that h declares as
// trailers (see declaredTrailers).
func takeTrailers(h http.Header) http.Header {
	var out http.Header
	for k := range declaredTrailers(h) {
		vv, ok := h[k]
		if !ok {
			continue
		}
		if out == nil {
			out = make(http.Header)
		}
		out[k] = vv
		delete(h, k)
	}
	return out
}

// declaredTrailers yields the names that h declares as trailers (named in
// its Trailer header) as net/http's writer takes them: canonical, and only
// names that may be trailers (see validTrailer).
func declaredTrailers(h http.Header) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, v := range h["Trailer"] {
			for name := range strings.SplitSeq(v, ",") {
				k := http.CanonicalHeaderKey(textproto.TrimString(name))
				if validTrailer(k) && !yield(k) {
					return
				}
			}
		}
	}
}

// declaresTrailer reports whether h declares the field k (a canonical
// name) as a trailer (see declaredTrailers).
func declaresTrailer(h http.Header, k string) bool {
	for t := range declaredTrailers(h) {
		if t == k {
			return true
		}
	}
	return false
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
