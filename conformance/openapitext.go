package conformance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// documentText is the OpenAPI document doc as UTF-8 without a byte order
// mark: one in UTF-8 is dropped (as Windows tools write it), and a
// document in UTF-16 with one (as PowerShell's redirection writes it) is
// decoded; one of an odd length is an error.
func documentText(doc []byte) ([]byte, error) {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(doc, []byte{0xEF, 0xBB, 0xBF}):
		return doc[3:], nil
	case bytes.HasPrefix(doc, []byte{0xFF, 0xFE}):
		order = binary.LittleEndian
	case bytes.HasPrefix(doc, []byte{0xFE, 0xFF}):
		order = binary.BigEndian
	default:
		return doc, nil
	}
	doc = doc[2:]
	if len(doc)%2 != 0 {
		return nil, errors.New("conformance: the OpenAPI document starts with a UTF-16 byte order mark, but is cut short (an odd number of bytes)")
	}
	units := make([]uint16, len(doc)/2)
	for i := range units {
		units[i] = order.Uint16(doc[2*i:])
	}
	out := make([]byte, 0, len(doc))
	for _, r := range utf16.Decode(units) {
		out = utf8.AppendRune(out, r)
	}
	return out, nil
}
