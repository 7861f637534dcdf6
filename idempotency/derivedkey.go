package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"

	"github.com/saferetry/saferetry/internal/contract"
)

// derivedKeyDomain separates derived keys from every other use of SHA-256
// over the same bytes; its version changes if the recipe ever does.
const derivedKeyDomain = "saferetry/derived-key/v1"

// DerivedKey returns a key for one side effect of the protected request
// that the handler runs under, and whether there is one: a pure function of
// the request's scope, its Idempotency-Key and label, so it is the same on
// every attempt, every retry and every takeover of the operation, on every
// instance, and different for another label, key or scope. It is a UUID in
// its text form (version 8, RFC 9562, its 122 free bits taken from the
// SHA-256 of the domain "saferetry/derived-key/v1", the scope, the key and
// the label, each length-prefixed), so it is a valid Idempotency-Key and fits
// a uuid column.
//
// Use it where a second run of the handler must find the first run's effect
// instead of making a second one: as the Idempotency-Key of a call to
// another service (saferetry.WithKey(ctx, k) on the outgoing request), as a
// unique column of the handler's own rows (INSERT ... ON CONFLICT DO
// NOTHING, then read the row back), or as the ID of an outbox message. One
// label per side effect: "charge", "email", "ledger-entry".
//
// It reports false outside a request protected by the Middleware (no key,
// an unprotected method, fail-open after a store failure).
//
// What each way of protecting a side effect guarantees:
//
//	protection                         crash mid-handler        paused holder resumes    store loses the record
//	transactional mode (pgstore.NewTx) rolled back, runs again  waits on the row lock    runs again
//	keyed by DerivedKey                second run finds it      second run finds it      second run finds it
//	fenced write (TokenFromContext)    runs again               stale write refused      runs again
//	none (lease mode alone)            runs twice               runs twice               runs twice
//
// "Runs again" is exactly once when the effect is a write in the same
// transaction; "finds it" holds when the side effect's own store keeps the
// derived key at least as long as the idempotency record.
func DerivedKey(ctx context.Context, label string) (string, bool) {
	c, ok := ctx.Value(claimCtxKey{}).(*claimCtx)
	if !ok {
		return "", false
	}
	return deriveKey(c.key, label), true
}

// deriveKey is DerivedKey's recipe.
func deriveKey(k Key, label string) string {
	// The message on the stack, hashed at once: a sha256.New and its
	// Writes cost more than the hashing of a short message.
	var buf [256]byte
	msg := buf[:0]
	for _, part := range [...]string{derivedKeyDomain, k.Scope, k.Key, label} {
		msg = binary.AppendUvarint(msg, uint64(len(part)))
		msg = append(msg, part...)
	}
	sum := sha256.Sum256(msg)
	u := [16]byte(sum[:16])
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // variant 10 (RFC 9562)
	var out [36]byte
	contract.EncodeUUID(&out, &u)
	return string(out[:])
}
