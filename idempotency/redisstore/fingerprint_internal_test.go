package redisstore

import (
	"strings"
	"testing"
)

// FuzzFingerprintForm: the stored form of a fingerprint decodes to it, so
// that two fingerprints share a stored form only when they are equal, and
// a fingerprint ending in a hex SHA-256 takes 32 bytes fewer stored.
func FuzzFingerprintForm(f *testing.F) {
	digest := strings.Repeat("0123456789abcdef", 4)
	for _, fp := range []string{"v1:" + digest, digest, "v1:" + digest[1:], "v1:" + strings.ToUpper(digest), "", "fp", "\x00", "\x01" + digest[:32]} {
		f.Add(fp)
	}
	f.Fuzz(func(t *testing.T, fp string) {
		stored := encodeFingerprint(fp)
		back, err := decodeFingerprint(stored)
		if err != nil || back != fp {
			t.Fatalf("decodeFingerprint(encodeFingerprint(%q)) = %q, %v", fp, back, err)
		}
		want := len(fp) + 1 // verbatim
		if n := len(fp) - digestHex; n >= 0 && isLowerHex(fp[n:]) {
			want = len(fp) + 1 - digestHex/2
		}
		if len(stored) != want {
			t.Errorf("encodeFingerprint(%q) takes %d bytes, want %d", fp, len(stored), want)
		}
	})
}

func TestDecodeFingerprintCorrupt(t *testing.T) {
	for _, stored := range []string{"", "\x02abc", "\x01short"} {
		if fp, err := decodeFingerprint(stored); err == nil {
			t.Errorf("decodeFingerprint(%q) = %q, want an error", stored, fp)
		}
	}
}

// isLowerHex reports whether s is all lowercase hex digits: the test's own
// reading of which fingerprints encodeFingerprint shortens.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
