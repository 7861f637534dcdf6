package contract

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// errBadParameters is ParseKey's error for parameters after an sf-string
// that RFC 9651 would not parse.
const errBadParameters KeyError = "the parameters after the sf-string are malformed"

// validParameters reports whether s is a list of RFC 9651 parameters
// (section 3.1.2): each ";", spaces, a key, and optionally "=" and a bare
// item. The values are checked but not kept: no parameter of an
// Idempotency-Key is defined, and RFC 9651 has unknown ones ignored.
func validParameters(s string) bool {
	for s != "" {
		if s[0] != ';' {
			return false
		}
		s = strings.TrimLeft(s[1:], " ")
		n := paramKeyLen(s)
		if n == 0 {
			return false
		}
		s = s[n:]
		if s != "" && s[0] == '=' {
			n = bareItemLen(s[1:])
			if n == 0 {
				return false
			}
			s = s[1+n:]
		}
	}
	return true
}

// paramKeyLen is the length of the key that starts s: lcalpha or "*",
// then lcalpha, digits, "_", "-", "." or "*"; 0 when s starts with none.
func paramKeyLen(s string) int {
	if s == "" || !(isLower(s[0]) || s[0] == '*') {
		return 0
	}
	i := 1
	for i < len(s) && (isLower(s[i]) || isDigit(s[i]) || strings.IndexByte("_-.*", s[i]) >= 0) {
		i++
	}
	return i
}

// bareItemLen is the length of the RFC 9651 bare item that starts s
// (integer, decimal, string, token, byte sequence, boolean, date or
// display string), 0 when none does.
func bareItemLen(s string) int {
	if s == "" {
		return 0
	}
	switch c := s[0]; {
	case c == '-' || isDigit(c):
		return numberLen(s)
	case c == '"':
		return stringLen(s)
	case c == '%':
		return displayStringLen(s)
	case c == '*' || isAlpha(c):
		i := 1
		for i < len(s) && (isTchar(s[i]) || s[i] == ':' || s[i] == '/') {
			i++
		}
		return i
	case c == ':':
		return byteSequenceLen(s)
	case c == '?':
		if len(s) > 1 && (s[1] == '0' || s[1] == '1') {
			return 2
		}
		return 0
	case c == '@':
		if n := numberLen(s[1:]); n > 0 && !strings.Contains(s[1:1+n], ".") {
			return 1 + n
		}
		return 0
	}
	return 0
}

// numberLen is the length of the integer (up to 15 digits) or decimal (up
// to 12 digits, a dot, 1 to 3 digits) that starts s, 0 when none does.
func numberLen(s string) int {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	whole := i - start
	if whole == 0 || whole > 15 {
		return 0
	}
	if i == len(s) || s[i] != '.' {
		return i
	}
	if whole > 12 {
		return 0
	}
	i++
	frac := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if n := i - frac; n < 1 || n > 3 {
		return 0
	}
	return i
}

// stringLen is the length of the sf-string that starts s (RFC 9651
// section 4.2.5), 0 when it is not one.
func stringLen(s string) int {
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1
		case c < 0x20 || c > 0x7e:
			return 0
		case c == '\\':
			if i++; i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return 0
			}
		}
	}
	return 0
}

// displayStringLen is the length of the display string that starts s
// (section 4.2.10: %"...", printable ASCII with %xx escapes in lowercase
// hex, decoding to valid UTF-8), 0 when it is not one.
func displayStringLen(s string) int {
	if len(s) < 2 || s[1] != '"' {
		return 0
	}
	var b []byte
	for i := 2; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			if !utf8.Valid(b) {
				return 0
			}
			return i + 1
		case c < 0x20 || c > 0x7e:
			return 0
		case c == '%':
			if i+2 >= len(s) || !isLowerHex(s[i+1]) || !isLowerHex(s[i+2]) {
				return 0
			}
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return 0
}

// byteSequenceLen is the length of the byte sequence that starts s
// (section 4.2.7: base64 between colons, its padding optional), 0 when it
// is not one or does not decode.
func byteSequenceLen(s string) int {
	end := strings.IndexByte(s[1:], ':')
	if end < 0 {
		return 0
	}
	content := s[1 : 1+end]
	for i := 0; i < len(content); i++ {
		if c := content[i]; !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
			return 0
		}
	}
	if n := len(content) % 4; n != 0 {
		content += strings.Repeat("=", 4-n)
	}
	if _, err := base64.StdEncoding.DecodeString(content); err != nil {
		return 0
	}
	return end + 2
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

func isLower(c byte) bool    { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool    { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool    { return isLower(c) || ('A' <= c && c <= 'Z') }
func isLowerHex(c byte) bool { return isDigit(c) || ('a' <= c && c <= 'f') }
