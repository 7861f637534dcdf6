package memstore

import (
	"strings"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
)

// entryWithFingerprint is an entry and the bytes of its fingerprint in one
// allocation of 144 bytes, a Go size class: what the entry (64 bytes) and
// a copy of a fingerprint of 65 to 80 bytes (an 80-byte class) take apart,
// in one allocation fewer. The Middleware's fingerprints ("v1:" and 64 hex
// digits, 67 bytes) are of that length (TestEntryAllocation).
type entryWithFingerprint struct {
	entry
	fp [fingerprintRoom]byte
}

// fingerprintRoom is the room for a fingerprint in entryWithFingerprint.
const fingerprintRoom = 80

// newEntry returns a new entry in progress holding a copy of fingerprint
// of its own: the caller's may be a slice of a larger string, which the
// store would keep whole while its byte bound counts only its length. A
// fingerprint that fills most of entryWithFingerprint's room shares the
// entry's allocation; a shorter or a longer one has its own, which takes
// no more heap than that room would.
func newEntry(fingerprint string) *entry {
	if n := len(fingerprint); n > fingerprintRoom-16 && n <= fingerprintRoom {
		ef := &entryWithFingerprint{entry: entry{state: idempotency.StateInProgress}}
		copy(ef.fp[:], fingerprint)
		ef.fingerprint = unsafe.String(&ef.fp[0], n) // never written again
		return &ef.entry
	}
	return &entry{state: idempotency.StateInProgress, fingerprint: strings.Clone(fingerprint)}
}
