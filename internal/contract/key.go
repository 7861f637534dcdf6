package contract

import (
	"errors"
	"fmt"
	"strings"
)

// Header names of the protocol.
const (
	// HeaderKey is "Idempotency-Key": the request header naming one
	// logical operation.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is "Idempotent-Replayed": set to "true" on an answer
	// the server replays from its record instead of running the handler.
	HeaderReplayed = "Idempotent-Replayed"
)

// MaxKeyLen is the longest key, in bytes, after an sf-string is unquoted.
const MaxKeyLen = 255

// KeyError says why a value is not a valid key, in words fit for a client.
// Every error of ParseKey, ParseKeyFields and ValidKey but ErrNoKey is one.
type KeyError string

func (e KeyError) Error() string { return string(e) }

// ErrNoKey is ParseKeyFields' error for a message without the header.
var ErrNoKey = errors.New("no Idempotency-Key")

const (
	errSeveralFields KeyError = "the header is given more than once"
	errEmptyValue    KeyError = "the value is empty"
	errList          KeyError = "the value holds several keys"
	errRawQuote      KeyError = "a raw key must not contain a double quote"
	errNotPrintable  KeyError = "the value is not printable ASCII"
	errUnterminated  KeyError = "the sf-string has no closing quote"
	errBadEscape     KeyError = "the sf-string has a bad escape"
	errTrailing      KeyError = "unexpected characters after the sf-string"
	errEmptyKey      KeyError = "the key is empty"
)

// ParseKeyFields returns the key carried by the values of all the
// Idempotency-Key fields of one message (h[HeaderKey], or h.Values(HeaderKey)):
// [ErrNoKey] when there are none, a [KeyError] when there are several (HTTP
// reads them as one list) or the one is not a valid key, else [ParseKey] of
// the one value.
func ParseKeyFields(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrNoKey
	case 1:
		return ParseKey(values[0])
	}
	return "", errSeveralFields
}

// errNonCanonical is KeyHeaderValues' error for a map that holds the
// header under a name http.Header's methods do not look up.
const errNonCanonical KeyError = "the header is set under a non-canonical name (" +
	"set it with Header.Set, or as Header[\"Idempotency-Key\"])"

// KeyHeaderValues returns the values of the Idempotency-Key fields of h
// for ParseKeyFields, and the error of a map that also holds the header
// under another spelling of its name ("idempotency-key", set by assigning
// to the map directly): net/http sends such an entry as it is, and a
// client that did not see it would send a key of its own beside it, so
// that the server reads two keys. Such a map is refused whole, with a
// [KeyError].
func KeyHeaderValues(h map[string][]string) ([]string, error) {
	if len(h) == 0 {
		// Not ranged over: starting an iteration, empty or not, costs a
		// random draw and about 200 instructions.
		return nil, nil
	}
	for name := range h {
		if len(name) == len(HeaderKey) && name != HeaderKey && strings.EqualFold(name, HeaderKey) {
			return nil, errNonCanonical
		}
	}
	return h[HeaderKey], nil
}

// ParseKey decodes one Idempotency-Key field value. The grammar is the
// Structured Field Item of RFC 9651 restricted to a String, plus the raw
// token that Stripe-style clients send:
//
//   - Leading and trailing spaces and tabs are not part of the value (RFC
//     9110 section 5.5 strips them from every field value; RFC 9651 discards
//     the spaces again).
//   - A value that starts with a double quote is an sf-string: printable
//     ASCII between quotes, with \" and \\ as the only escapes. Its
//     characters are the key, spaces at either end included: `" a"` is the
//     key " a". RFC 9651 parameters after it (`"a";p=1`) are accepted if
//     well formed and ignored, as RFC 9651 has unknown parameters be: no
//     parameter of an Idempotency-Key is defined, so `"a";p=1` and `"a"`
//     name the same operation. Malformed ones are refused.
//   - Any other value is the key as it is (a raw key). It must hold no comma
//     (that would be a list of several keys) and no double quote (broken
//     quoting); such keys travel as sf-strings (see FormatKey).
//
// The key must then pass [ValidKey]. Errors are [KeyError]s.
func ParseKey(value string) (string, error) {
	v := trimOWS(value)
	if v == "" {
		return "", errEmptyValue
	}
	if v[0] == '"' {
		return parseSFString(v)
	}
	if plainRawKey(v) {
		return v, nil
	}
	for i := 0; i < len(v); i++ { // strings.IndexAny(v, `",`), without its call per byte of a short key
		switch v[i] {
		case ',':
			return "", errList
		case '"':
			return "", errRawQuote
		}
	}
	if err := ValidKey(v); err != nil {
		return "", err
	}
	return v, nil
}

// plainRawKey reports whether v, a raw key, is valid as it is: at most
// MaxKeyLen bytes of printable ASCII, none a comma or a double quote.
// ParseKey takes such a key (nearly every key sent: a UUID, or a
// Stripe-style token) without its loops over each byte, which then
// find the error of any other; this checks eight bytes at a time.
func plainRawKey(v string) bool {
	if len(v) > MaxKeyLen {
		return false
	}
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	var bad uint64
	i := 0
	for ; i+8 <= len(v); i += 8 {
		x := uint64(v[i]) | uint64(v[i+1])<<8 | uint64(v[i+2])<<16 | uint64(v[i+3])<<24 |
			uint64(v[i+4])<<32 | uint64(v[i+5])<<40 | uint64(v[i+6])<<48 | uint64(v[i+7])<<56
		comma, quote := x^(ones*','), x^(ones*'"')
		// Each term has a high bit set where a byte is, in turn, below
		// 0x20, above 0x7e, a comma or a double quote (a byte that is
		// may set others too, which only matters for telling which).
		bad |= (x-ones*0x20)&^x | (x + ones) | x |
			(comma-ones)&^comma | (quote-ones)&^quote
	}
	for ; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '"' {
			return false
		}
	}
	return bad&highs == 0
}

// trimOWS strips optional whitespace (spaces and tabs) from both ends.
func trimOWS(s string) string {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	return s[i:j]
}

// parseSFString unquotes the RFC 9651 sf-string that makes up all of v,
// which starts with a double quote.
func parseSFString(v string) (string, error) {
	var b strings.Builder // used only once an escape is met
	start := 1
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			if b.Len() == 0 {
				b.Grow(len(v))
			}
			b.WriteString(v[start:i])
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errBadEscape
			}
			start = i
		case c == '"':
			if rest := v[i+1:]; rest != "" {
				if rest[0] != ';' {
					return "", errTrailing
				}
				if !validParameters(rest) {
					return "", errBadParameters
				}
			}
			key := v[start:i]
			if start > 1 {
				b.WriteString(key)
				key = b.String()
			}
			if err := ValidKey(key); err != nil {
				return "", err
			}
			return key, nil
		case c < 0x20 || c > 0x7e:
			return "", errNotPrintable
		}
	}
	return "", errUnterminated
}

// ValidKey reports whether key, as decoded, is a valid key: 1 to MaxKeyLen
// bytes of printable ASCII (0x20 to 0x7E). Its error is a [KeyError].
func ValidKey(key string) error {
	switch {
	case key == "":
		return errEmptyKey
	case len(key) > MaxKeyLen:
		return KeyError(fmt.Sprintf("the key is %d bytes long, the limit is %d", len(key), MaxKeyLen))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return KeyError(fmt.Sprintf("the key has byte %#02x at offset %d, outside printable ASCII", c, i))
		}
	}
	return nil
}

// FormatKey encodes a valid key for the Idempotency-Key header: as an RFC
// 9651 sf-string when structured is true, otherwise raw (unchanged), except
// a key that [ParseKey] would not read back from its raw form: one with a
// double quote or a comma, or with a space at either end. ParseKey of the
// result is key.
func FormatKey(key string, structured bool) string {
	if !structured && !needsQuotes(key) {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

func needsQuotes(key string) bool {
	return key != "" && (key[0] == ' ' || key[len(key)-1] == ' ' || strings.ContainsAny(key, `",`))
}
