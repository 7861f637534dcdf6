package redisstore

import (
	"fmt"
	"strings"
)

// Stored fingerprints. A fingerprint that ends in a hex SHA-256 (64
// lowercase hex digits, as "v1:" and the digest from
// idempotency.Fingerprint) is kept as fpDigest, then what comes before the
// digits, then the digest's 32 bytes; any other fingerprint as fpVerbatim,
// then the fingerprint. That keeps the middleware's fingerprint at 36 bytes,
// within Redis's listpack limit of 64, where its 67 characters of hex are
// not, and the first byte makes the form one to one. The Lua function
// legacy (scripts.go) is the same decoding, for old entries' fp.
const (
	fpVerbatim byte = 0
	fpDigest   byte = 1

	digestHex = 64
)

// encodeFingerprint returns the stored form of fp. The digits are read
// and checked in one pass through hexValue, as every Claim encodes its
// fingerprint: checking them first and then decoding them digit by digit
// cost about 1,400 instructions a claim.
func encodeFingerprint(fp string) string {
	return bytesString(appendFingerprint(make([]byte, 0, maxStoredFingerprint(fp)), fp))
}

// maxStoredFingerprint is the most bytes encodeFingerprint takes for fp.
func maxStoredFingerprint(fp string) int { return 1 + len(fp) }

// appendFingerprint appends the stored form of fp (see encodeFingerprint)
// to b.
func appendFingerprint(b []byte, fp string) []byte {
	n := len(fp) - digestHex
	if n < 0 {
		return append(append(b, fpVerbatim), fp...)
	}
	hex := fp[n:]
	var digest [digestHex / 2]byte
	bad := byte(0)
	for i := range digest {
		hi, lo := hexValue[hex[2*i]], hexValue[hex[2*i+1]]
		bad |= hi | lo
		digest[i] = hi<<4 | lo
	}
	if bad > 0xf {
		return append(append(b, fpVerbatim), fp...)
	}
	b = append(b, fpDigest)
	b = append(b, fp[:n]...)
	return append(b, digest[:]...)
}

// decodeFingerprint is the inverse of encodeFingerprint.
func decodeFingerprint(stored string) (string, error) {
	switch {
	case stored == "":
	case stored[0] == fpVerbatim:
		return stored[1:], nil
	case stored[0] == fpDigest && len(stored) >= 1+digestHex/2:
		n := len(stored) - digestHex/2
		var b strings.Builder
		b.Grow(n - 1 + digestHex)
		b.WriteString(stored[1:n])
		for i := n; i < len(stored); i++ {
			b.WriteByte(hexDigits[stored[i]>>4])
			b.WriteByte(hexDigits[stored[i]&0xf])
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("corrupt fingerprint %q", stored)
}

const hexDigits = "0123456789abcdef"

// hexValue is the value of each lowercase hex digit, and 0xff for every
// other byte.
var hexValue = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0xff
		}
	}
	return t
}()
