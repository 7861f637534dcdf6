package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"
	"net/url"
	"sync"
	"unsafe"

	"github.com/saferetry/saferetry/internal/contract"
)

// fingerprintVersion prefixes every fingerprint so that a future change of
// the recipe cannot be mistaken for a changed request: a stored "v1:" entry
// never matches a "v2:" request by accident.
const fingerprintVersion = "v1:"

// Fingerprint returns the fingerprint the Middleware computes for r with the
// given body (r.Body itself is not read; the files of a multipart form
// parsed before are, see below): "v1:" followed by the hex SHA-256
// of the method, the escaped URL path, the canonical query (parameters sorted by
// name, the order of repeated values kept), the body's media type and the
// body. A body whose
// Content-Type is application/json or ends in +json, and that is valid JSON,
// is canonicalised first (object members sorted, insignificant whitespace
// dropped, strings re-escaped minimally, numbers kept as their literal text),
// so reordered members (other than case variants, below) or reformatting
// give the same fingerprint while any changed value gives a different one.
// Any other body, and a JSON-typed body that is not valid JSON, is taken
// byte for byte.
//
// The choices, where two requests could be judged the same or not:
//   - Strings are compared decoded: "\u00e9" and "é", or "\/" and "/", are the
//     same; invalid UTF-8 is kept as its bytes.
//   - Numbers are compared as written: 1, 1.0 and 1e0 differ, since an
//     application may read them differently (an integer field rejects 1.0).
//   - Duplicate member names are kept, in their order, after sorting: {"a":1,"a":2}
//     and {"a":2,"a":1} differ, as decoders disagree on which one wins.
//   - Member names equal under Unicode case folding, as encoding/json matches
//     struct fields ("amount" and "Amount", "k" and the Kelvin sign U+212A),
//     keep their order too: {"amount":1,"Amount":2} and {"Amount":2,"amount":1}
//     differ, as a case-insensitive decoder takes the last match. Names are
//     folded decoded, with invalid UTF-8 and lone surrogates read as U+FFFD.
//     Only an object holding such a pair is sorted by folded name rather than
//     by name, so the v1 fingerprint of every other body stays as it was.
//   - The path is taken escaped, so /pay/a%2Fb and /pay/a/b differ, as
//     they do to routers that read the raw path; the hex digits of its
//     escapes are compared without case (RFC 3986, section 6.2.2.1), so
//     /pay/a%2fb is /pay/a%2Fb, and a retry re-encoded with the other
//     case is the same request.
//   - The path and query are those of r.URL, what the handler reads, and,
//     when a handler in front of the Middleware changed the path (as
//     http.StripPrefix does), also the path the client sent (r.RequestURI),
//     so that /v1/pay and /v2/pay stay two routes behind their prefixes. The
//     query the client sent is not taken: what a handler in front removed
//     from it (a signature checked and dropped) may change on every attempt.
//   - Query parameters are compared decoded (a=%41 is a=A, and "a" is "a=");
//     a query that does not decode is taken as it is.
//   - The media type is part of it, as it decides how the application
//     reads the same bytes: the same JSON sent as application/json, as
//     application/merge-patch+json or as application/vnd.bank.v2+json
//     differs, and so do parameters (version=2). Its spelling does not
//     matter: the case of the type and of parameter names, the order of
//     parameters, a charset's case, and charset=utf-8 on a JSON type. A
//     missing Content-Type, an empty body and a parsed form (below) name
//     none. A body sent as JSON that does not parse as JSON (or nests
//     deeper than the canonicaliser goes) is taken as bytes, beside its
//     media type.
//   - A handler in front of the Middleware that parsed the body as a form
//     (r.FormValue, r.ParseForm or r.ParseMultipartForm, leaving
//     r.PostForm not empty or r.MultipartForm set) consumed it, and the
//     application reads the parsed form, not the body: then the form's
//     values (as the query's, sorted by name) and its files (field name,
//     file name, part header and content) are part of it too, beside what
//     was left of the body. Other requests keep their v1 fingerprints.
//   - Headers, the host and the scheme are not part of it. A body with a
//     Content-Encoding (gzip) is taken as it arrives, encoded: a client
//     that compresses it anew on each attempt, with a timestamp in the
//     gzip header, sends another body and gets 422 (the contract asks for
//     a byte-identical body on every attempt).
//
// Fingerprint is safe for concurrent use.
func Fingerprint(r *http.Request, body []byte) string { return fingerprintIn(r, body, nil) }

// fingerprintLen is the length of a fingerprint: the version and 64 hex
// digits.
const fingerprintLen = len(fingerprintVersion) + 2*sha256.Size

// fingerprintIn is Fingerprint, its text written in room when room has
// fingerprintLen bytes of capacity (see fingerprint).
func fingerprintIn(r *http.Request, body, room []byte) string {
	// The escaped path keeps /a%2Fb apart from /a/b, as routers that look at
	// the raw path do; the case of its escapes' hex digits is not kept (see
	// upperEscapes).
	var ct string
	if v := r.Header["Content-Type"]; len(v) > 0 { // Header.Get, without canonicalising a canonical name
		ct = v[0]
	}
	var form *http.Request
	if formParsed(r) {
		form = r
	}
	path := r.URL.EscapedPath()
	return fingerprint(r.Method, upperEscapes(path), r.URL.RawQuery, appendRequestTarget(nil, r, path), form, ct, body, room)
}

// fpState is the pooled state of one fingerprint: the hash, the
// canonicaliser's buffers (kept in the pool up to a few MiB, see
// canonicaliser.oversized, so that large bodies do not allocate them anew
// on every call) and the small fields' bytes.
type fpState struct {
	hash   hash.Hash
	canon  canonicaliser
	fields []byte
	chunk  [4 << 10]byte // the sink's buffer
	sum    [sha256.Size]byte
	out    [fingerprintLen]byte
}

var fpPool = sync.Pool{New: func() any { return &fpState{hash: sha256.New()} }}

// fingerprint hashes the stream of tagged, length-prefixed fields (see
// appendField) that no two different requests share: the method, the path,
// the canonical query if any, the path the client sent if a handler in
// front changed it (target, see appendRequestTarget), the form parsed from
// the body in front of the Middleware if form is not nil (see
// appendParsedForm), else the body's media type if it names one (see
// bodyType), and the body as canonical JSON ('j') or as bytes ('b'). The
// body is hashed where it lies, in the request's bytes or the
// canonicaliser's buffer, and never copied to a stream of its own (the
// short pieces of reordered objects pass through a 4 KiB buffer). The
// text is written in room when room has the capacity for it, and the
// string returned is room's bytes, which nothing may write again (see
// request.readBody); otherwise it has an allocation of its own.
func fingerprint(method, path, rawQuery string, target []byte, form *http.Request, contentType string, body, room []byte) string {
	st := fpPool.Get().(*fpState)
	defer fpPool.Put(st)
	h := st.hash
	h.Reset()
	f := appendField(st.fields[:0], 'm', method)
	f = appendField(f, 'p', path)
	if rawQuery != "" {
		f = appendField(f, 'q', canonicalQuery(rawQuery))
	}
	f = append(f, target...)
	if form != nil {
		f = appendParsedForm(f, form, st.chunk[:])
	}
	var isJSON bool
	if len(body) > 0 {
		// The media type is part of it beside a body (see bodyType), not
		// beside a parsed form, whose values the application reads
		// whatever the form's media type (or multipart boundary) was.
		var withType []byte
		if isJSON, withType = bodyType(f, contentType); form == nil {
			f = withType
		}
	}
	if isJSON && st.canon.read(body) == nil {
		h.Write(appendFieldHead(f, 'j', st.canon.canonicalLen()))
		st.canon.emit(&sink{w: h, b: st.chunk[:0]})
	} else {
		h.Write(appendFieldHead(f, 'b', len(body)))
		h.Write(body)
	}
	if cap(f) > 64<<10 {
		f = nil // a long query's: not worth keeping
	}
	st.fields = f[:0]
	if st.canon.oversized() {
		st.canon = canonicaliser{}
	}
	h.Sum(st.sum[:0])
	hexSum := st.out[copy(st.out[:], fingerprintVersion):]
	for i, b := range st.sum {
		binary.BigEndian.PutUint16(hexSum[2*i:], contract.HexPairs[b]) // hex.Encode, a store a byte
	}
	if cap(room) < fingerprintLen {
		return string(st.out[:])
	}
	room = append(room[:0], st.out[:]...)
	return unsafe.String(&room[0], fingerprintLen)
}

// appendField appends a tagged, length-prefixed field to the hashed stream
// b, so that no two different requests give the same stream.
func appendField(b []byte, tag byte, v string) []byte {
	return append(appendFieldHead(b, tag, len(v)), v...)
}

// appendFieldHead appends the tag and the length of a field of n bytes.
func appendFieldHead(b []byte, tag byte, n int) []byte {
	return binary.AppendUvarint(append(b, tag), uint64(n))
}

// canonicalQuery sorts the query parameters by name and keeps the order of
// repeated values. A query that does not parse is taken as it is, marked so
// that it cannot collide with a parsed one.
func canonicalQuery(raw string) string {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return "!" + raw
	}
	return v.Encode()
}
