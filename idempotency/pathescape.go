package idempotency

import "strings"

// upperEscapes returns the escaped path p with the hex digits of its
// percent-encodings in upper case, as the fingerprint takes it: they are
// case-insensitive (RFC 3986, section 6.2.2.1), so /a%2fb and /a%2Fb are
// one URI, and a client or proxy that re-encodes a retry with the other
// case sends the same request. Only the case of the digits is set; what
// is escaped stays as sent (/a%2Fb is not /a/b). A path without a
// lower-case escape, the common case, is returned as it is, without
// allocating, so that its v1 fingerprint stays as it was.
func upperEscapes(p string) string {
	var b strings.Builder
	done := 0 // p[:done] is in b, once b is in use
	for i := strings.IndexByte(p, '%'); i >= 0 && i+2 < len(p); {
		if hi, lo := p[i+1], p[i+2]; isHex(hi) && isHex(lo) && (isLowerHex(hi) || isLowerHex(lo)) {
			if done == 0 {
				b.Grow(len(p))
			}
			b.WriteString(p[done : i+1])
			b.WriteByte(upperHex(hi))
			b.WriteByte(upperHex(lo))
			done = i + 3
		}
		j := strings.IndexByte(p[i+1:], '%')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if done == 0 {
		return p
	}
	b.WriteString(p[done:])
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isLowerHex(c byte) bool { return 'a' <= c && c <= 'f' }

func upperHex(c byte) byte {
	if isLowerHex(c) {
		return c - 'a' + 'A'
	}
	return c
}
