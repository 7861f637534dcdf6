package contract

import "encoding/hex"

// EncodeUUID writes the canonical text of the UUID u (8-4-4-4-12
// lower-case hex digits, as uuid.UUID.String writes them) into dst, which
// holds 36 bytes: the form of the keys the client generates and of the
// keys the server derives.
func EncodeUUID(dst *[36]byte, u *[16]byte) {
	hex.Encode(dst[0:8], u[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], u[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], u[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], u[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], u[10:])
}
