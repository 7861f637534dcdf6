package idempotency

import (
	"errors"
	"net/http"

	"github.com/saferetry/saferetry/internal/contract"
)

// MaxKeyLen is the longest Idempotency-Key value accepted, in bytes, after
// an sf-string is unquoted: 255 (saferetry.MaxKeyLen on the client).
const MaxKeyLen = contract.MaxKeyLen

// Errors returned by ParseKey and KeyFromHeader. Match them with errors.Is.
var (
	// ErrMissingKey reports that the request carries no Idempotency-Key.
	ErrMissingKey = errors.New("idempotency: missing Idempotency-Key")
	// ErrMalformedKey reports an Idempotency-Key that is empty, too long, not
	// printable ASCII, given more than once, or a broken sf-string.
	ErrMalformedKey = errors.New("idempotency: malformed Idempotency-Key")
)

// ParseKey decodes one Idempotency-Key field value, with the grammar of
// saferetry.ParseKey on the client, so both sides name an operation by the
// same key.
//
// A value is either a raw token or an RFC 9651 sf-string, with the RFC's
// rules: spaces and tabs around the value are not part of it (HTTP strips
// them); the characters of an sf-string ("...", with \" and \\ as the only
// escapes) are the key, spaces at its ends included; RFC 9651 parameters
// after an sf-string ("k";p=1) are accepted when well formed and ignored
// (no parameter of the key is defined, so "k";p=1 is the key k), and
// refused when malformed. After unquoting the key must hold 1 to MaxKeyLen
// bytes of printable ASCII (0x20-0x7E). A raw token must not contain a
// comma or a double quote, since either means several values were folded
// into one field or the quoting is broken.
//
// Its error is a *KeyError, which matches ErrMalformedKey.
func ParseKey(value string) (string, error) {
	k, err := contract.ParseKey(value)
	if err != nil {
		return "", &KeyError{Reason: err.Error()}
	}
	return k, nil
}

// KeyFromHeader returns the key that the Idempotency-Key fields of h carry
// (see ParseKey): ErrMissingKey when there is none, a *KeyError (matching
// ErrMalformedKey) when there are several, which HTTP reads as one list,
// or the one is malformed.
func KeyFromHeader(h http.Header) (string, error) {
	return keyFromFields(h.Values(HeaderIdempotencyKey))
}

// keyFromFields is KeyFromHeader on the values of the fields.
func keyFromFields(values []string) (string, error) {
	k, err := contract.ParseKeyFields(values)
	switch {
	case err == contract.ErrNoKey:
		return "", ErrMissingKey
	case err != nil:
		return "", &KeyError{Reason: err.Error()}
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
