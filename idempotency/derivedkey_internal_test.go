package idempotency

import (
	"strings"
	"testing"
)

// TestDeriveKeyGolden pins the recipe: the values are those of its first
// implementation, so a faster one must give the same keys.
func TestDeriveKeyGolden(t *testing.T) {
	for _, tt := range []struct{ scope, key, label, want string }{
		{"", "", "", "12d10e5a-328e-8ccc-af6b-1c199525e496"},
		{"mockserver/epoch-0", "5f0c4a4e-5a8e-4c55-9f4c-0b1b9f7c2a11", "payment", "d0bbc79c-6ec3-84ab-b712-c0c36200c259"},
		{"s", "k", "charge", "00dda2ad-e90f-8d9b-9010-a2d33009a907"},
		{strings.Repeat("s", 300), strings.Repeat("k", 255), strings.Repeat("l", 200), "fa6165b4-8c9c-86f3-afbc-3a9efc6ca3a2"},
	} {
		if got := deriveKey(Key{Scope: tt.scope, Key: tt.key}, tt.label); got != tt.want {
			t.Errorf("deriveKey(%.20q, %.20q, %.20q) = %s, want %s", tt.scope, tt.key, tt.label, got, tt.want)
		}
	}
}
