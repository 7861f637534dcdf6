package idempotency

import (
	"net/http"
	"net/textproto"
	"strings"
	"sync"

	"github.com/saferetry/saferetry/internal/contract"
)

// Header names of the protocol.
const (
	// HeaderIdempotencyKey is "Idempotency-Key": it carries the client's key
	// for one logical operation.
	HeaderIdempotencyKey = contract.HeaderKey
	// HeaderReplayed is "Idempotent-Replayed": it is set to "true" on
	// answers that come from the store rather than from running the handler.
	HeaderReplayed = contract.HeaderReplayed
)

// neverReplayed reports whether the canonical header name k must never be
// stored or replayed: it is per-response (Date, rate limits, Retry-After),
// per-client (Set-Cookie), per-connection, or computed on write.
func neverReplayed(k string) bool {
	switch k {
	case "Set-Cookie", "Set-Cookie2", "Date", "Retry-After", "Content-Length",
		"Transfer-Encoding", "Connection", "Keep-Alive", "Trailer", "Upgrade",
		"Proxy-Connection", HeaderReplayed:
		return true
	}
	return strings.HasPrefix(k, "Ratelimit") || strings.HasPrefix(k, "X-Ratelimit")
}

// labelsCoding reports whether the field k: v of a header labels its body
// with a content coding, under a name in any case (see keeps): a body
// is encoded when one of its header's fields does.
func labelsCoding(k string, v []string) bool {
	return len(v) > 0 && len(k) == len("Content-Encoding") && strings.EqualFold(k, "Content-Encoding")
}

// keeps reports whether the header k (a canonical name) of an answer is
// stored and replayed: an allow-listed one, or, with an encoded body
// (encoded), Content-Encoding and Vary whatever the allow-list. The stored
// bytes are the encoded ones, so a replay without their Content-Encoding
// would be undecodable bytes labelled identity, and without Vary caches
// would not know the coding was negotiated.
func (c *config) keeps(k string, encoded bool) bool {
	return c.replayHeaders[k] || encoded && codingHeader(k)
}

// codingHeader reports whether k is one of the names an encoded body keeps
// whatever the allow-list (see keeps): Content-Encoding and Vary.
func codingHeader(k string) bool { return k == "Content-Encoding" || k == "Vary" }

// storedHeaders returns the headers of h that are kept (see keeps), or nil;
// a kept name without values too (Content-Type set to nil, which tells
// net/http not to sniff one, must stay so on a replay). A declared trailer
// (see declaredTrailers) is not kept, whatever its name: net/http's writer
// sends it after the body of the first answer only. A handler may set a
// name in the map in any case ("ETag", "location"), which net/http sends
// as it is and clients read without regard to case: such a header is kept
// when its canonical name is, under that name, so that stored names are
// canonical and a replay finds them with plain lookups.
// When every header of h is kept it returns h itself: the handler is done
// with it, and stores copy what they keep. So it does when every one is
// but a Content-Length the handler set (by its canonical name, with
// values), which it takes out of h and returns as held: the caller puts it
// back (see restoreLength) once the store has answered, before anything
// else reads h. Otherwise it fills a map it borrows from storedHeaderMaps,
// and reports borrowed: the caller hands it back with returnStoredHeaders
// once the store has answered.
func (c *config) storedHeaders(h http.Header) (out http.Header, borrowed bool, held []string) {
	// One pass tells whether the body is encoded (labelsCoding) and whether
	// every name is kept: a name is, whatever the coding, or only with an
	// encoded body (ifEncoded), or not at all (notKept), Content-Length
	// apart (length).
	encoded, ifEncoded, notKept, length := false, false, false, false
	for k, v := range h {
		encoded = encoded || labelsCoding(k, v)
		if !c.keeps(k, false) { // a name not in canonical form is never in the allow-list
			switch {
			case k == "Content-Length" && v != nil: // never kept, first: no lookup
				length = true
			case c.keeps(k, true):
				ifEncoded = true
			default:
				notKept = true
			}
		}
	}
	if !notKept && (!ifEncoded || encoded) {
		// With no Trailer header, which is never kept.
		if length {
			held = h["Content-Length"]
			delete(h, "Content-Length")
		}
		return h, false, held
	}
	trailers := len(h["Trailer"]) > 0
	for k, v := range h {
		if !c.keeps(k, encoded) {
			ck := textproto.CanonicalMIMEHeaderKey(k)
			if ck == k || !c.keeps(ck, encoded) {
				continue
			}
			k = ck
		} else if trailers && declaresTrailer(h, k) {
			continue // sent after the body of the first answer only
		}
		if out == nil {
			out = storedHeaderMaps.Get().(http.Header)
		}
		if prev := out[k]; len(prev) > 0 {
			out[k] = append(prev, v...) // the same name in two cases: prev is clipped, so this copies
			continue
		}
		out[k] = v[:len(v):len(v)] // the handler is done with it; a later append must copy
	}
	return out, out != nil, nil
}

// storedHeaderMaps holds the maps of the stored headers of answers that
// carry a header not kept (a Content-Length, a Date), so that such answers
// do not cost a map each: Store.Complete and TxStore.Complete copy what
// they keep and keep no reference to the Header.
var storedHeaderMaps = sync.Pool{New: func() any { return make(http.Header, 4) }}

// restoreLength puts back in h the Content-Length values held that
// storedHeaders took out of it, if any. It is deferred, so that h is whole
// again however the store calls end (a panic included) before the answer
// goes out (see recorder.flush).
func restoreLength(h http.Header, held []string) {
	if held != nil {
		h["Content-Length"] = held
	}
}

// returnStoredHeaders hands back a map that storedHeaders borrowed.
func returnStoredHeaders(h http.Header) {
	clear(h)
	storedHeaderMaps.Put(h)
}
