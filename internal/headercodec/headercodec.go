// Package headercodec encodes an http.Header as bytes and back, byte for
// byte: names and values may hold any octets (NUL, invalid UTF-8, 0xFF), and
// the order of repeated values is kept. The stores use it for the headers
// of a stored response, where JSON would refuse NUL (PostgreSQL jsonb) or
// replace invalid UTF-8 with U+FFFD (encoding/json).
//
// The encoding starts with the version byte 0x01, which no JSON text starts
// with, so a store can tell it from headers it stored as JSON before.
// Then: the number of names, and for each name, in sorted order, its length
// and bytes, the number of its values, and each value's length and bytes;
// every number is a uvarint.
package headercodec

import (
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
)

// Version is the first byte of every encoding.
const Version byte = 0x01

// ErrCorrupt is returned by Decode for bytes that Append did not produce.
var ErrCorrupt = errors.New("headercodec: corrupt header encoding")

// Append appends the encoding of h to dst. A nil and an empty h encode the
// same way.
func Append(dst []byte, h http.Header) []byte {
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, uint64(len(h)))
	var stack [16]string
	names := stack[:0]
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		dst = appendString(dst, name)
		vs := h[name]
		dst = binary.AppendUvarint(dst, uint64(len(vs)))
		for _, v := range vs {
			dst = appendString(dst, v)
		}
	}
	return dst
}

// Len returns the length of h's encoding, len(Append(nil, h)), without
// encoding it: a caller that writes the length before the encoding, or
// sizes its buffer to hold it, then encodes h once, into its own buffer.
func Len(h http.Header) int {
	n := 1 + uvarintLen(len(h))
	for name, vs := range h {
		n += uvarintLen(len(name)) + len(name) + uvarintLen(len(vs))
		for _, v := range vs {
			n += uvarintLen(len(v)) + len(v)
		}
	}
	return n
}

// uvarintLen is the length of n as a uvarint.
func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// IsEncoded reports whether b starts like an encoding of this package (and
// not, for instance, like a JSON object).
func IsEncoded(b []byte) bool { return len(b) > 0 && b[0] == Version }

// Decode returns the header encoded in b, never nil on success. It returns
// an error wrapping ErrCorrupt for anything Append could not have produced.
func Decode(b []byte) (http.Header, error) {
	if !IsEncoded(b) {
		return nil, ErrCorrupt
	}
	return DecodeString(string(b))
}

// DecodeString is Decode of an encoding held in a string (as a Redis
// client returns it). The names and values of the header it returns are
// substrings of s: no copy of each.
func DecodeString(s string) (http.Header, error) {
	if len(s) == 0 || s[0] != Version {
		return nil, ErrCorrupt
	}
	d := decoder{s: s[1:]}
	n := d.count()
	h := make(http.Header, n)
	for range n {
		name := d.str()
		vs := make([]string, d.count())
		for i := range vs {
			vs[i] = d.str()
		}
		if d.bad {
			break
		}
		h[name] = vs
	}
	if d.bad || len(d.s) != 0 {
		return nil, ErrCorrupt
	}
	return h, nil
}

// decoder reads uvarints and strings from s; a read past the end or a count
// larger than what is left sets bad and returns zero values.
type decoder struct {
	s   string
	bad bool
}

// uvarint reads what binary.AppendUvarint wrote, as binary.Uvarint does.
func (d *decoder) uvarint() uint64 {
	var v uint64
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64 && !d.bad; i++ {
		c := d.s[i]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			break // overflows 64 bits
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			d.s = d.s[i+1:]
			return v
		}
	}
	d.bad = true
	return 0
}

// count reads a number of items, each at least one byte long, so a count
// over the bytes left is corrupt (and allocates nothing).
func (d *decoder) count() int {
	v := d.uvarint()
	if v > uint64(len(d.s)) {
		d.bad = true
		return 0
	}
	return int(v)
}

func (d *decoder) str() string {
	n := d.count()
	if d.bad {
		return ""
	}
	str := d.s[:n]
	d.s = d.s[n:]
	return str
}
