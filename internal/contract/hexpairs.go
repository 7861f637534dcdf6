package contract

// HexPairs holds the two lower-case hex digits of each byte value, the
// first in the high byte: stored with binary.BigEndian.PutUint16, a
// byte's text takes one load and one store (encoding/hex's Encode takes
// two of each, and a slice's bounds checks). The text of a UUID key
// ([EncodeUUID]) and of a fingerprint's digest is written with it.
var HexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for b := range t {
		t[b] = uint16(digits[b>>4])<<8 | uint16(digits[b&0xf])
	}
	return t
}()
