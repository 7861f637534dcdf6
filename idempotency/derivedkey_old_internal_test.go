package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
)

// deriveKeyStreamed is deriveKey as first written: the pieces written one
// by one to a sha256.New.
func deriveKeyStreamed(k Key, label string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, part := range [...]string{derivedKeyDomain, k.Scope, k.Key, label} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	b := hex.EncodeToString(u)
	return b[0:8] + "-" + b[8:12] + "-" + b[12:16] + "-" + b[16:20] + "-" + b[20:]
}

// TestDeriveKeyIsStreamed compares deriveKey with the streamed recipe on
// every total message length around the stack buffer's 256 bytes and
// SHA-256's 64-byte blocks, at the uvarint length-prefix boundaries (127,
// 128, 16383, 16384) and on random lengths up to 70,000.
func TestDeriveKeyIsStreamed(t *testing.T) {
	check := func(scope, key, label string) {
		t.Helper()
		k := Key{Scope: scope, Key: key}
		if got, want := deriveKey(k, label), deriveKeyStreamed(k, label); got != want {
			t.Fatalf("deriveKey(%d, %d, %d bytes) = %s, streamed %s", len(scope), len(key), len(label), got, want)
		}
	}
	for n := range 600 {
		check(strings.Repeat("s", n), "k", "payment")
		check("", strings.Repeat("\xff", n), "")
		check("a", "b", strings.Repeat("é", n/2))
	}
	for _, n := range []int{127, 128, 129, 255, 256, 257, 16383, 16384, 16385, 70000} {
		check(strings.Repeat("s", n), strings.Repeat("k", n), strings.Repeat("l", n))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	rnd := func(max int) string {
		b := make([]byte, rng.IntN(max))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	for range 2000 {
		check(rnd(300), rnd(300), rnd(300))
	}
	for range 50 {
		check(rnd(70000), rnd(300), rnd(70000))
	}
}
