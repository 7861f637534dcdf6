package idempotency

import (
	"math/rand/v2"
	"testing"
)

// plainRunByByte is plainRun's definition, a byte at a time: the index of
// the first byte from s[i] that strByte marks strStop (len(s) if none), and
// the union of the classes of the bytes before it.
func plainRunByByte(s []byte, i int) (int, uint8) {
	var class uint8
	for ; i < len(s); i++ {
		b := strByte[s[i]]
		if b&strStop != 0 {
			break
		}
		class |= b
	}
	return i, class
}

// TestPlainRun: plainRun gives what plainRunByByte gives, from every start
// of texts made of the bytes at the edges of strByte's classes (controls,
// '"', '\\', the upper-case letters and their neighbours, DEL, non-ASCII),
// in runs of every length around a word's 8 bytes.
func TestPlainRun(t *testing.T) {
	edges := []byte{0x00, 0x1f, 0x20, '!', '"', '#', '@', 'A', 'M', 'Z', '[', '\\', ']', '`', 'a', 'z', 0x7e, 0x7f, 0x80, 0xc3, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(s []byte) {
		t.Helper()
		for i := 0; i <= len(s); i++ {
			gotI, gotClass := plainRun(s, i)
			wantI, wantClass := plainRunByByte(s, i)
			if gotI != wantI || gotClass != wantClass {
				t.Fatalf("plainRun(%q, %d) = %d, %b; want %d, %b", s, i, gotI, gotClass, wantI, wantClass)
			}
		}
	}
	for range 20000 {
		s := make([]byte, rng.IntN(40))
		for j := range s {
			if rng.IntN(4) == 0 {
				s[j] = edges[rng.IntN(len(edges))]
			} else {
				s[j] = byte('a' + rng.IntN(26)) // long plain runs
			}
		}
		check(s)
	}
	for b := range 256 { // each byte alone at every place of a plain run
		for n := range 20 {
			s := []byte("abcdefghijklmnopqrstuvwxyz")[:20]
			s[n] = byte(b)
			check(s)
		}
	}
}
