package pgtext

import (
	"encoding/hex"
	"slices"
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

// TestPlainASCIIOnlyWhereKeptAsIs checks the fast test against the general
// one: every length to 24, with a NUL, a byte of 0x80 or more, or Mark at
// every place (each byte of a word, and the tail).
func TestPlainASCIIOnlyWhereKeptAsIs(t *testing.T) {
	for n := range 25 {
		for _, b := range []byte{0x00, 0x01, 0x7f, 0x80, 0xc3, 0xff} {
			for i := range n + 1 {
				s := []byte(strings.Repeat("k", n))
				if i < n {
					s[i] = b
				}
				general := utf8.ValidString(string(s)) && !strings.ContainsRune(string(s), 0) && !strings.HasPrefix(string(s), Mark)
				if got := plainASCII(string(s)); got && !general || got != general && isASCII(s) {
					t.Errorf("plainASCII(%q) = %v; the general test says %v", s, got, general)
				}
			}
		}
	}
}

// isASCII reports whether every byte of s is under 0x80.
func isASCII(s []byte) bool {
	for _, c := range s {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// TestEncodeAsTheGeneralTest compares Encode with its definition (kept
// when valid UTF-8 without NUL that does not start with Mark, Mark and
// hex otherwise) on every length to 40, around the 8-byte words of the
// ASCII test, with two of NUL, Mark, 0x80 and 0xff at every pair of
// places, and on multi-byte UTF-8 split across words.
func TestEncodeAsTheGeneralTest(t *testing.T) {
	general := func(s string) string {
		if utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.HasPrefix(s, Mark) {
			return s
		}
		return Mark + hex.EncodeToString([]byte(s))
	}
	check := func(s string) {
		if got, want := Encode(s), general(s); got != want {
			t.Fatalf("Encode(%q) = %q; want %q", s, got, want)
		}
	}
	special := []byte{0x00, 0x01, 0x80, 0xff}
	for n := range 41 {
		base := []byte(strings.Repeat("k", n))
		check(string(base))
		for i := range n {
			for j := i; j < n; j++ {
				for _, a := range special {
					for _, b := range special {
						s := slices.Clone(base)
						s[i], s[j] = a, b
						check(string(s))
					}
				}
			}
			check(string(base[:i]) + "é✓" + string(base[i:]))
		}
	}
}
