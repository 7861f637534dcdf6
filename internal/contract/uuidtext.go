package contract

import "encoding/binary"

// EncodeUUID writes the canonical text of the UUID u (8-4-4-4-12
// lower-case hex digits, as uuid.UUID.String writes them) into dst, which
// holds 36 bytes: the form of the keys the client generates and of the
// keys the server derives. The stores are spelt out: at offsets known at
// compile time, they need no bounds check.
func EncodeUUID(dst *[36]byte, u *[16]byte) {
	be := binary.BigEndian
	be.PutUint16(dst[0:], HexPairs[u[0]])
	be.PutUint16(dst[2:], HexPairs[u[1]])
	be.PutUint16(dst[4:], HexPairs[u[2]])
	be.PutUint16(dst[6:], HexPairs[u[3]])
	dst[8] = '-'
	be.PutUint16(dst[9:], HexPairs[u[4]])
	be.PutUint16(dst[11:], HexPairs[u[5]])
	dst[13] = '-'
	be.PutUint16(dst[14:], HexPairs[u[6]])
	be.PutUint16(dst[16:], HexPairs[u[7]])
	dst[18] = '-'
	be.PutUint16(dst[19:], HexPairs[u[8]])
	be.PutUint16(dst[21:], HexPairs[u[9]])
	dst[23] = '-'
	be.PutUint16(dst[24:], HexPairs[u[10]])
	be.PutUint16(dst[26:], HexPairs[u[11]])
	be.PutUint16(dst[28:], HexPairs[u[12]])
	be.PutUint16(dst[30:], HexPairs[u[13]])
	be.PutUint16(dst[32:], HexPairs[u[14]])
	be.PutUint16(dst[34:], HexPairs[u[15]])
}
