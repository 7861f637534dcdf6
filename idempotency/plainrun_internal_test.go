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

// FuzzPlainRun: plainRun gives what plainRunByByte gives, for any bytes
// (invalid UTF-8, controls, DEL, the bytes of U+2028 and U+2029 included)
// from every start, and for the same bytes at the end of a longer buffer's
// length-capped slice, so that a word read past len(s) would show.
func FuzzPlainRun(f *testing.F) {
	for _, s := range []string{"", "abcdefgh", "abcdefg\"", "ABCDEFGHIJKLMNOP\\", "abcdefghZ\x1f", "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\"",
		"abc\u2028def\u2029ghi\"", "abcdefg\xff\xfe\"", "\x00abcdefg", "@[`{AZaz~!\x20\"", "abcdefgh\xc3", "a\"ZZZZZZ", "abcdefg"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// in's bytes followed by stop-free bytes that a read past the
		// slice's length would take for more of the string.
		buf := append(append([]byte(nil), in...), "abcdefgh"...)
		s := buf[:len(in):len(in)]
		for i := 0; i <= len(s); i++ {
			gotI, gotClass := plainRun(s, i)
			wantI, wantClass := plainRunByByte(s, i)
			if gotI != wantI || gotClass != wantClass {
				t.Fatalf("plainRun(%q, %d) = %d, %b; want %d, %b", s, i, gotI, gotClass, wantI, wantClass)
			}
		}
	})
}
