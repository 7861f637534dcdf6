package idempotency

import (
	"errors"
	"strings"
)

// MaxKeyLength is the longest Idempotency-Key value accepted, in bytes, after
// an sf-string is unquoted.
const MaxKeyLength = 255

// Errors returned by ParseKey. Match them with errors.Is.
var (
	// ErrMissingKey reports that the request carries no Idempotency-Key.
	ErrMissingKey = errors.New("idempotency: missing Idempotency-Key")
	// ErrMalformedKey reports an Idempotency-Key that is empty, too long, not
	// printable ASCII, given more than once, or a broken sf-string.
	ErrMalformedKey = errors.New("idempotency: malformed Idempotency-Key")
)

// ParseKey returns the key carried by the values of the Idempotency-Key
// header fields of one request (for example r.Header["Idempotency-Key"]).
//
// A value is either a raw token or an RFC 8941/9651 sf-string ("...", with \"
// and \\ as the only escapes), surrounded by optional spaces or tabs. After
// unquoting the key must hold 1 to MaxKeyLength bytes of printable ASCII
// (0x20-0x7E). A raw token must not contain a comma or a double quote, since
// either means several values were folded into one field or the quoting is
// broken. Parameters after an sf-string are not accepted.
//
// ParseKey returns ErrMissingKey when values is empty and ErrMalformedKey
// (wrapped with the reason) for every other failure, several values included.
func ParseKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrMissingKey
	case 1:
	default:
		return "", malformed("the header is given more than once")
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", malformed("the value is empty")
	}
	if v[0] == '"' {
		return parseSFString(v)
	}
	if len(v) > MaxKeyLength {
		return "", malformed("the value is longer than 255 bytes")
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ',':
			return "", malformed("the value holds several keys")
		case c == '"':
			return "", malformed("a raw key must not contain a double quote")
		case c < 0x20 || c > 0x7e:
			return "", malformed("the value is not printable ASCII")
		}
	}
	return v, nil
}

// parseSFString unquotes an RFC 8941 sf-string that makes up all of v.
func parseSFString(v string) (string, error) {
	// Fast path: no escapes, so the key is a substring of v.
	end := -1
	escaped := false
	for i := 1; i < len(v); i++ {
		c := v[i]
		if c == '\\' {
			escaped = true
			break
		}
		if c == '"' {
			end = i
			break
		}
		if c < 0x20 || c > 0x7e {
			return "", malformed("the value is not printable ASCII")
		}
	}
	if !escaped {
		if end < 0 {
			return "", malformed("the sf-string has no closing quote")
		}
		if end != len(v)-1 {
			return "", malformed("unexpected characters after the sf-string")
		}
		return checkKeyLength(v[1:end])
	}
	var b strings.Builder
	b.Grow(len(v))
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", malformed("the sf-string has a bad escape")
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", malformed("unexpected characters after the sf-string")
			}
			return checkKeyLength(b.String())
		case c < 0x20 || c > 0x7e:
			return "", malformed("the value is not printable ASCII")
		default:
			b.WriteByte(c)
		}
	}
	return "", malformed("the sf-string has no closing quote")
}

func checkKeyLength(k string) (string, error) {
	if k == "" {
		return "", malformed("the key is empty")
	}
	if len(k) > MaxKeyLength {
		return "", malformed("the key is longer than 255 bytes")
	}
	return k, nil
}

// KeyError is a malformed-key error with its reason. It wraps
// ErrMalformedKey. ParseKey returns it as a *KeyError; the zero KeyError has
// an empty Reason. A KeyError is not modified after it is returned, so it may
// be read from several goroutines.
type KeyError struct {
	// Reason says what is wrong with the value, in words fit for a client.
	Reason string
}

// Error returns the message, prefixed with the package name.
func (e *KeyError) Error() string { return "idempotency: malformed Idempotency-Key: " + e.Reason }

// Unwrap returns ErrMalformedKey.
func (e *KeyError) Unwrap() error { return ErrMalformedKey }

func malformed(reason string) error { return &KeyError{Reason: reason} }
