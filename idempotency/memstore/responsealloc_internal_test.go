package memstore

import (
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestPackedResponseSizes: a response whose bytes fit in a packedResponse
// takes one allocation, of the smallest Go size class that holds the
// struct and the bytes, never more heap than the struct's 64-byte class
// and the bytes' own class apart; longer ones take two.
func TestPackedResponseSizes(t *testing.T) {
	classes := []int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320} // Go's, up to 320
	class := func(n int) int {
		for _, c := range classes {
			if n <= c {
				return c
			}
		}
		t.Fatalf("no class listed for %d bytes", n)
		return 0
	}
	for i, p := range packedSizes {
		if size := int(responseSize) + p.room; class(size) != size || (i > 0 && p.room != packedSizes[i-1].room+16) {
			t.Errorf("packedSizes[%d]: room %d, %d bytes in all: not a size class 16 bytes above the last", i, p.room, size)
		}
	}
	last := packedSizes[len(packedSizes)-1].room
	for n := 1; n <= last+40; n++ {
		r := allocResponse(n)
		if len(r.data) != 0 || cap(r.data) < n || r.packed != (n <= last) {
			t.Fatalf("%d bytes: data has length %d, capacity %d, packed %v", n, len(r.data), cap(r.data), r.packed)
		}
		want := 2.0
		if r.packed {
			want = 1
			if held, apart := int(responseSize)+cap(r.data), 64+class(n); held != class(int(responseSize)+n) || held > apart {
				t.Errorf("%d bytes: packed in %d bytes, want %d, at most the %d they take apart", n, held, class(int(responseSize)+n), apart)
			}
		}
		// Under the race detector the unpacked data's append of make is
		// not one allocation.
		if got := testing.AllocsPerRun(20, func() { allocResponse(n) }); got != want && !testenv.RaceEnabled {
			t.Errorf("%d bytes: allocResponse allocates %v times, want %v", n, got, want)
		}
	}
}
