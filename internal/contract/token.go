package contract

import "strings"

// ValidToken reports whether s is an RFC 9110 token (one or more tchar),
// the grammar of a method and of a header field name.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// ValidFieldValue reports whether s travels as an HTTP field value as
// net/http sends one: no control character but a horizontal tab.
func ValidFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
