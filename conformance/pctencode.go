package conformance

import "strings"

// escapeUnreserved is s with every byte but RFC 3986's unreserved ones
// (letters, digits, "-", ".", "_", "~") percent-encoded, as RFC 6570
// expands a value (and OpenAPI's styles write one): a reserved character
// ("=", ";", ",", "&", "+") in it is never taken for a delimiter, and a
// space is %20, which no reader takes for a "+".
func escapeUnreserved(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// unreserved reports whether c is an RFC 3986 unreserved character.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// cookieValue reports whether s is sent as a cookie's value as it is: RFC
// 6265's cookie-octets, no space, quote, comma, semicolon or backslash.
func cookieValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}

// escapeQuery is the query s, written by hand, with what no query may
// hold percent-encoded (a space, "#", a quote, a byte beyond ASCII, a "%"
// that begins no escape), and RFC 3986's query characters, its escapes
// included, as they are.
func escapeQuery(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]),
			c != '%' && (unreserved(c) || strings.IndexByte("!$&'()*+,;=:@/?", c) >= 0):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
