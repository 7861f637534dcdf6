package memstore

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
)

// TestOwnKey: ownKey copies the scope and the key, whichever is empty, in
// one allocation, so that the store keeps none of the caller's bytes (see
// TestKeepsStringsOfItsOwn).
func TestOwnKey(t *testing.T) {
	header := strings.Repeat("x", 64)
	for _, k := range []idempotency.Key{
		{Key: header[:10]},
		{Scope: header[:7], Key: header[7:20]},
		{Scope: header[:7]},
	} {
		got := ownKey(k)
		if got != k {
			t.Fatalf("ownKey(%q) = %q", k, got)
		}
		for _, s := range []string{got.Scope, got.Key} {
			if s != "" && within(s, header) {
				t.Errorf("ownKey(%q) keeps the caller's bytes", k)
			}
		}
		if n := testing.AllocsPerRun(100, func() { ownKey(k) }); n != 1 {
			t.Errorf("ownKey(%q) allocates %v times, want 1", k, n)
		}
	}
}

// within reports whether s's bytes lie in those of of.
func within(s, of string) bool {
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(of)))
	return p >= lo && p < lo+uintptr(len(of))
}
