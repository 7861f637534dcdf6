package memstore

import (
	"bytes"
	"encoding/binary"
	"math"
	"net/http"

	"github.com/saferetry/saferetry/idempotency"
)

// response is the outcome of a completed entry as the store keeps it: its
// body and its header packed into one byte slice. A byte slice holds no
// pointers, so the collector marks it without reading it, and it is one
// allocation where a header map, or even slices of fields and of values,
// would be several objects for every collection to scan again, entry after
// entry. Only an outcome that is replayed gets the http.Header form, once,
// in view, which every refused Claim then shares. Besides view it is never
// modified once built, and view is set under the shard lock and charged as
// it is, so that size gives the same answer when the bytes are charged and
// when they are given back.
type response struct {
	// data is the body, then the header's fields, each its name's length
	// (a uvarint) and name, its count of values plus one (0 for a nil
	// slice), and each value's length and value.
	data     []byte
	view     *idempotency.Response // made at the first replay; read-only
	bodyLen  int32                 // the body is data[:bodyLen]
	fields   int32                 // the header's fields after the body; -1 when the Header was nil
	status   int32                 // an HTTP status, 100 to 999
	nilBody  bool                  // the Body was nil rather than empty
	oversize bool
	packed   bool // data shares the struct's allocation (see allocResponse)
}

// maxBodyLen is the longest body a response keeps: its length is kept as
// an int32 (bodyLen). Tests lower it, so as not to build bodies of 2 GiB.
var maxBodyLen = math.MaxInt32

// newResponse returns the store's copy of r.
func newResponse(r *idempotency.Response) *response {
	// The header's fields are encoded in the one pass over the map that
	// also counts them, on the stack unless the header is long, and then
	// copied after the body: a second pass to size data first would cost
	// more than the copy.
	var stack [256]byte
	fields := stack[:0]
	count := int32(-1)
	if r.Header != nil {
		count = int32(len(r.Header))
		for name, vv := range r.Header {
			fields = binary.AppendUvarint(fields, uint64(len(name)))
			fields = append(fields, name...)
			n := uint64(0)
			if vv != nil {
				n = uint64(len(vv)) + 1
			}
			fields = binary.AppendUvarint(fields, n)
			for _, v := range vv {
				fields = binary.AppendUvarint(fields, uint64(len(v)))
				fields = append(fields, v...)
			}
		}
	}
	var out *response
	if n := len(r.Body) + len(fields); n == 0 {
		out = &response{}
	} else {
		out = allocResponse(n)
		out.data = append(append(out.data, r.Body...), fields...)
	}
	out.status, out.oversize, out.nilBody = int32(r.Status), r.Oversize, r.Body == nil
	out.bodyLen, out.fields = int32(len(r.Body)), count
	return out
}

// readUvarint reads a uvarint that binary.AppendUvarint wrote at the start
// of s, and returns it and the rest of s.
func readUvarint(s string) (int, string) {
	var n uint64
	for i := 0; ; i++ {
		c := s[i]
		n |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int(n), s[i+1:]
		}
	}
}

// valueCount returns how many values r's header fields hold in all. It
// reads them from data rather than keeping the count, which would take the
// struct, 48 bytes, into the next 8: a response is kept for every
// completed entry, its count needed only when its view is made.
func (r *response) valueCount() int {
	b := r.data[r.bodyLen:]
	skip := func() uint64 { // a length or a count, and b past it
		n, w := binary.Uvarint(b)
		b = b[w:]
		return n
	}
	values := 0
	for range max(r.fields, 0) {
		b = b[skip():] // the name
		count := int(skip())
		for range count - 1 {
			b = b[skip():]
		}
		values += max(count-1, 0)
	}
	return values
}

// body returns r's body, read-only: an append to it copies.
func (r *response) body() []byte {
	switch {
	case r.nilBody:
		return nil
	case r.bodyLen == 0:
		return []byte{} // data may be nil
	}
	return r.data[:r.bodyLen:r.bodyLen]
}

// export returns a copy of r as an idempotency.Response the caller owns.
func (r *response) export() *idempotency.Response {
	return &idempotency.Response{Status: int(r.status), Oversize: r.oversize, Body: bytes.Clone(r.body()), Header: r.httpHeader()}
}

// httpHeader returns r's header as a new http.Header, nil if it had none.
// Its strings share one allocation and its values one array; each value
// slice is capped, so that an append copies.
func (r *response) httpHeader() http.Header {
	if r.fields < 0 {
		return nil
	}
	h := make(http.Header, r.fields)
	text := string(r.data[r.bodyLen:])
	values := make([]string, r.valueCount())
	for range r.fields {
		var n, count int
		n, text = readUvarint(text)
		name := text[:n]
		count, text = readUvarint(text[n:])
		if count == 0 {
			h[name] = nil
			continue
		}
		vv := values[: count-1 : count-1]
		values = values[count-1:]
		for i := range vv {
			n, text = readUvarint(text)
			vv[i], text = text[:n], text[n:]
		}
		h[name] = vv
	}
	return h
}
