package pgtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncode(t *testing.T) {
	tests := []struct {
		in      string
		escaped bool
	}{
		{"", false},
		{"tenant-42", false},
		{"héllo ✓", false},
		{"a\x00b", true},
		{"\xff", true},
		{"bad \xc3\x28 utf8", true},
		{"\x01starts with the mark", true},
		{"mark \x01 inside", false},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		enc := Encode(tt.in)
		if escaped := enc != tt.in; escaped != tt.escaped {
			t.Errorf("Encode(%q) = %q, escaped %v, want %v", tt.in, enc, escaped, tt.escaped)
		}
		if got := Decode(enc); got != tt.in {
			t.Errorf("Decode(Encode(%q)) = %q", tt.in, got)
		}
		if prev, dup := seen[enc]; dup {
			t.Errorf("%q and %q both encode to %q", prev, tt.in, enc)
		}
		seen[enc] = tt.in
	}
}

func FuzzEncode(f *testing.F) {
	f.Add("plain")
	f.Add("\x01\x00")
	f.Fuzz(func(t *testing.T, a string) {
		enc := Encode(a)
		if Decode(enc) != a {
			t.Fatalf("round trip of %q failed: %q", a, enc)
		}
		if !validText(enc) {
			t.Fatalf("Encode(%q) = %q is not storable as text", a, enc)
		}
	})
}

// validText reports whether a PostgreSQL text column can hold s.
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
