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
		n := len(fp) - digestHex
		if n >= 0 && isLowerHex(fp[n:]) && len(stored) != len(fp)+1-digestHex/2 {
			t.Errorf("encodeFingerprint(%q) takes %d bytes, want %d", fp, len(stored), len(fp)+1-digestHex/2)
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
