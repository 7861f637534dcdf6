package saferetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// HeaderIdempotencyKey is the request header that names a logical operation.
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxKeyLen is the longest key, in bytes, that the Transport accepts.
const MaxKeyLen = 255

type keyCtxKey struct{}

// WithKey returns a copy of ctx that makes the Transport use key as the
// Idempotency-Key of the request sent with it, instead of a generated one.
// An Idempotency-Key header already on the request wins over the context.
// The key is validated when the request is sent: an empty key, one longer
// than 255 bytes, or one with a byte outside printable ASCII (or with a
// leading or trailing space) fails the request with [ErrInvalidKey] before
// anything is sent. It is sent as [FormatKey] encodes it.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtxKey{}, key)
}

// KeyFromContext returns the key set by [WithKey], if any.
func KeyFromContext(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtxKey{}).(string)
	return k, ok
}

// KeyFromResponse returns the Idempotency-Key that the request answered by
// resp carried, unquoted if it was sent as an sf-string, and false when
// resp, its Request or the header is missing.
func KeyFromResponse(resp *http.Response) (string, bool) {
	if resp == nil || resp.Request == nil {
		return "", false
	}
	v := resp.Request.Header.Values(HeaderIdempotencyKey)
	if len(v) != 1 {
		return "", false
	}
	k, err := ParseKey(v[0])
	if err != nil {
		return "", false
	}
	return k, true
}

// NewKey returns a fresh random (version 4) UUID in its canonical text form.
// It fails only when the system's random source does.
func NewKey() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("saferetry: generate idempotency key: %w", err)
	}
	return u.String(), nil
}

// ValidateKey reports whether key is usable as an idempotency key: 1 to 255
// bytes of printable ASCII (0x20 to 0x7E), not starting or ending with a
// space, which HTTP would strip. The error matches [ErrInvalidKey].
func ValidateKey(key string) error {
	if reason := keyProblem(key); reason != "" {
		return &Error{Cause: ErrInvalidKey, Key: key, Err: errorString(reason)}
	}
	return nil
}

func keyProblem(key string) string {
	switch {
	case len(key) == 0:
		return "key is empty"
	case len(key) > MaxKeyLen:
		return fmt.Sprintf("key is %d bytes long, the limit is %d", len(key), MaxKeyLen)
	case key[0] == ' ' || key[len(key)-1] == ' ':
		return "key starts or ends with a space"
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Sprintf("key has byte %#02x at offset %d, outside printable ASCII", c, i)
		}
	}
	return ""
}

// ParseKey decodes an Idempotency-Key header value: an RFC 8941 sf-string
// ("..." with \" and \\ escapes) is unquoted, anything else is taken as the
// raw key. A raw key must not hold a comma (a list of several keys) or a
// double quote (broken quoting), as servers built on the idempotency
// package refuse them; such keys travel as sf-strings (see [FormatKey]).
// The decoded key is validated as by [ValidateKey].
func ParseKey(value string) (string, error) {
	key := value
	if len(value) > 0 && value[0] == '"' {
		k, ok := unquoteSFString(value)
		if !ok {
			return "", &Error{Cause: ErrInvalidKey, Key: value, Err: errorString("malformed sf-string")}
		}
		key = k
	} else if strings.ContainsAny(value, `",`) {
		return "", &Error{Cause: ErrInvalidKey, Key: value, Err: errorString("a raw key must not hold a comma or a double quote; send it as an sf-string")}
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// FormatKey encodes a valid key for the Idempotency-Key header: as an RFC
// 8941 sf-string when structured is true, otherwise raw (unchanged). A key
// whose raw form a server would misread is quoted all the same: one with a
// double quote (a leading one would be taken for an sf-string) or a comma
// (a list separator, which the idempotency package refuses in a raw key).
// [ParseKey] of the result gives key back.
func FormatKey(key string, structured bool) string {
	if !structured && !strings.ContainsAny(key, `",`) {
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

func unquoteSFString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	inner := s[1 : len(s)-1]
	if !strings.ContainsAny(inner, `"\`) {
		return inner, true
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch c {
		case '"':
			return "", false
		case '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", false
			}
			c = inner[i]
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// headerKey decodes and validates the key in h: "" when h carries none,
// an error matching [ErrInvalidKey] when it carries several or a bad one.
// wire is the header value as it is.
func headerKey(h http.Header) (key, wire string, err error) {
	vals := h.Values(HeaderIdempotencyKey)
	switch len(vals) {
	case 0:
		return "", "", nil
	case 1:
	default:
		return "", "", &Error{Cause: ErrInvalidKey, Err: errorString("request carries several Idempotency-Key values")}
	}
	k, err := ParseKey(vals[0])
	if err != nil {
		return "", "", err
	}
	return k, vals[0], nil
}

// keySource says where an operation's key came from.
type keySource uint8

const (
	keyNone keySource = iota
	keyHeader
	keyContext
	keyGenerated
)

// resolveKey picks the key of one logical operation and the exact header
// value to send on every attempt. A key already on the request is sent as
// it is; a key from the context or a generated one is formatted per cfg.
func (c *config) resolveKey(req *http.Request) (key, wire string, src keySource, err error) {
	if k, w, err := headerKey(req.Header); k != "" || err != nil {
		return k, w, keyHeader, err
	}
	if k, ok := KeyFromContext(req.Context()); ok {
		if err := ValidateKey(k); err != nil {
			return "", "", keyContext, err
		}
		return k, FormatKey(k, c.structuredKey), keyContext, nil
	}
	if !c.keyMethod(req.Method) {
		return "", "", keyNone, nil
	}
	if k, ok := req.Context().Value(pinnedKeyCtxKey{}).(string); ok {
		return k, FormatKey(k, c.structuredKey), keyGenerated, nil
	}
	k, err := NewKey()
	if err != nil {
		return "", "", keyGenerated, err
	}
	return k, FormatKey(k, c.structuredKey), keyGenerated, nil
}

// pinnedKeyCtxKey carries the key generated by [Client.Do] for its whole
// call. Unlike a key from [WithKey] it is used only for methods that would
// get a generated key, so that a 303 turning a POST into a GET does not send
// the POST's key with the GET.
type pinnedKeyCtxKey struct{}

// pinKey generates the key of a logical operation up front, for a request
// that would otherwise get one generated per RoundTrip, so that every hop of
// a 307/308 redirect (each a separate RoundTrip) carries the same key.
func (c *config) pinKey(req *http.Request) (context.Context, error) {
	ctx := req.Context()
	if len(req.Header.Values(HeaderIdempotencyKey)) > 0 || !c.keyMethod(req.Method) {
		return ctx, nil
	}
	if _, ok := KeyFromContext(ctx); ok {
		return ctx, nil
	}
	k, err := NewKey()
	if err != nil {
		return ctx, &Error{Cause: ErrNotSent, Err: err}
	}
	return context.WithValue(ctx, pinnedKeyCtxKey{}, k), nil
}

func (c *config) keyMethod(method string) bool {
	if method == "" {
		method = http.MethodGet
	}
	for _, m := range c.keyMethods {
		if m == method {
			return true
		}
	}
	return false
}
