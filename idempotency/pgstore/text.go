package pgstore

import (
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// escapeMark starts the text form of a string that a text column cannot
// hold as it is.
const escapeMark = "\x01"

// encodeText returns the form in which s is kept in a text column (scope,
// key, fingerprint). PostgreSQL text holds valid UTF-8 without NUL, so such
// a string is kept as it is, unless it starts with escapeMark; any other
// string is kept as escapeMark followed by its bytes in hex. The mapping is
// injective (an escaped form starts with escapeMark, which no string kept as
// it is does), so equal columns mean equal strings, and rows written before
// escaping existed keep matching.
func encodeText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.HasPrefix(s, escapeMark) {
		return s
	}
	return escapeMark + hex.EncodeToString([]byte(s))
}

// decodeText reverses encodeText.
func decodeText(s string) string {
	rest, ok := strings.CutPrefix(s, escapeMark)
	if !ok {
		return s
	}
	b, err := hex.DecodeString(rest)
	if err != nil {
		return s // not written by encodeText: keep what is there
	}
	return string(b)
}
