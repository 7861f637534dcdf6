package saferetry

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unsafe"

	"github.com/saferetry/saferetry/internal/contract"
)

// HeaderIdempotencyKey is "Idempotency-Key", the request header that names
// a logical operation.
const HeaderIdempotencyKey = contract.HeaderKey

// MaxKeyLen is the longest key, in bytes, that the Transport accepts: 255.
const MaxKeyLen = contract.MaxKeyLen

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
// resp carried, decoded as by [ParseKey], and false when resp, its Request
// or the header is missing, or the header is not a valid key. A caller
// whose read of resp's body fails asks again under this key (see
// [WithKey]) to get the stored answer replayed whole.
func KeyFromResponse(resp *http.Response) (string, bool) {
	if resp == nil || resp.Request == nil {
		return "", false
	}
	k, err := contract.ParseKeyFields(resp.Request.Header.Values(HeaderIdempotencyKey))
	if err != nil {
		return "", false
	}
	// A copy: the header's value may be the text of a generated key that
	// the Transport keeps in its operation, with the operation's first
	// request and body, which a key kept for a later retry must not keep.
	return strings.Clone(k), true
}

// NewKey returns a fresh random (version 4) UUID in its canonical text form.
// It fails only when the system's random source does. It draws its bytes
// from [keyRandom], so the text is its only allocation (uuid.NewRandom makes
// two, and reads the random source once per key).
func NewKey() (string, error) {
	var t keyText
	if err := t.generate(); err != nil {
		return "", err
	}
	return string(t[:]), nil
}

// keyText holds the canonical text of a UUID. The Transport keeps one in
// each operation, so that a generated key costs no allocation of its own
// (unless a hook or a logger, which may keep the key, is set).
type keyText [36]byte

// generate fills t with the text of a fresh random (version 4) UUID.
func (t *keyText) generate() error {
	var u [16]byte
	if err := keyRandom.read(u[:]); err != nil {
		return fmt.Errorf("saferetry: generate idempotency key: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4 (RFC 9562, section 5.4)
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	contract.EncodeUUID((*[36]byte)(t), &u)
	return nil
}

// string returns t's text without copying it: t must not change while
// the string is in use, which holds t's memory for as long.
func (t *keyText) string() string { return unsafe.String(&t[0], len(t)) }

// keyRandom is the random source of NewKey.
var keyRandom randomPool

// randomPool hands out bytes of crypto/rand read 256 at a time. Keys are
// names, not secrets, so bytes waiting in memory for their key are no
// weakness. It is safe for concurrent use.
type randomPool struct {
	mu   sync.Mutex
	buf  [256]byte
	left int // bytes at the end of buf not handed out yet
}

// read fills p (at most len(buf) bytes) with random bytes used nowhere else.
func (r *randomPool) read(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left < len(p) {
		if _, err := rand.Read(r.buf[:]); err != nil {
			return err
		}
		r.left = len(r.buf)
	}
	copy(p, r.buf[len(r.buf)-r.left:])
	r.left -= len(p)
	return nil
}

// ValidateKey reports whether key is usable as an idempotency key that the
// caller supplies (see [WithKey]): 1 to 255 bytes of printable ASCII (0x20
// to 0x7E), not starting or ending with a space. The last rule is the
// client's own, stricter than the key grammar (see [ParseKey]): such a key
// survives only as an sf-string, and any client that sent it raw would
// lose its spaces and name another operation. The error matches
// [ErrInvalidKey].
func ValidateKey(key string) error {
	err := contract.ValidKey(key)
	if err == nil && (key[0] == ' ' || key[len(key)-1] == ' ') {
		err = errorString("the key starts or ends with a space")
	}
	if err != nil {
		return &Error{Cause: ErrInvalidKey, Key: key, Err: err}
	}
	return nil
}

// ParseKey decodes an Idempotency-Key header value with the grammar that
// the idempotency package's servers use, so that both read one value as
// the same key (RFC 9651 rules for the structured form):
//
//   - spaces and tabs around the value are not part of it;
//   - a value starting with a double quote is an sf-string ("..." with \"
//     and \\ escapes), whose characters are the key, spaces at its ends
//     included; RFC 9651 parameters after it ("k";p=1) are ignored when
//     well formed (the key is k) and refused when not;
//   - anything else is the raw key, which must not hold a comma (a list of
//     several keys) or a double quote (broken quoting); such keys travel
//     as sf-strings (see [FormatKey]).
//
// The key must be 1 to 255 bytes of printable ASCII. Errors match
// [ErrInvalidKey]. A key decoded from an sf-string may start or end with a
// space, which [ValidateKey] refuses for keys the caller supplies.
func ParseKey(value string) (string, error) {
	k, err := contract.ParseKey(value)
	if err != nil {
		return "", &Error{Cause: ErrInvalidKey, Key: value, Err: err}
	}
	return k, nil
}

// FormatKey encodes a valid key for the Idempotency-Key header: as an RFC
// 9651 sf-string when structured is true, otherwise raw (unchanged). A key
// whose raw form a server would misread is quoted all the same: one with a
// double quote (a leading one would be taken for an sf-string), a comma (a
// list separator, which the idempotency package refuses in a raw key) or a
// space at either end (which HTTP strips). [ParseKey] of the result gives
// key back.
func FormatKey(key string, structured bool) string {
	return contract.FormatKey(key, structured)
}

// headerKey decodes and validates the key in h: "" when h carries none,
// an error matching [ErrInvalidKey] when it carries several or a bad one,
// or carries one under a non-canonical name ("idempotency-key", assigned
// to the map directly), which net/http would send beside the key a
// client adds.
// wire is the header value as it is.
func headerKey(h http.Header) (key, wire string, err error) {
	vals, err := contract.KeyHeaderValues(h)
	if err != nil {
		return "", "", &Error{Cause: ErrInvalidKey, Err: err}
	}
	k, err := contract.ParseKeyFields(vals)
	switch {
	case err == contract.ErrNoKey:
		return "", "", nil
	case err != nil && len(vals) > 1:
		return "", "", &Error{Cause: ErrInvalidKey, Err: err}
	case err != nil:
		return "", "", &Error{Cause: ErrInvalidKey, Key: vals[0], Err: err}
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
// A key generated here is written into text and shares its memory; call
// is the Client.Do call the request is a hop of, if any (see hopOf).
func (c *config) resolveKey(req *http.Request, call *callContext, text *keyText) (key, wire string, src keySource, err error) {
	if k, w, err := headerKey(req.Header); k != "" || err != nil {
		return k, w, keyHeader, err
	}
	if k, ok := KeyFromContext(req.Context()); ok {
		if err := ValidateKey(k); err != nil {
			return "", "", keyContext, err
		}
		return k, FormatKey(k, c.structuredKey), keyContext, nil
	}
	if !c.keyMethods.Has(req.Method) {
		return "", "", keyNone, nil
	}
	var k string
	if call != nil && call.pinned {
		k = call.pinnedKey()
	} else {
		if err := text.generate(); err != nil {
			return "", "", keyGenerated, err
		}
		k = text.string()
	}
	// A generated key (a UUID) needs no quotes unless asked to be an sf-string.
	if !c.structuredKey {
		return k, k, keyGenerated, nil
	}
	return k, FormatKey(k, true), keyGenerated, nil
}
