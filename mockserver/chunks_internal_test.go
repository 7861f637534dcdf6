package mockserver

import (
	"strconv"
	"strings"
	"testing"
)

func TestTextChunksKeepsEachRunWhole(t *testing.T) {
	var tc textChunks
	type run struct {
		at    textPos
		parts []string
	}
	var runs []run
	// Runs of up to 3 KiB cross many chunk boundaries; one is longer than
	// a chunk.
	for i := range 200 {
		parts := []string{strconv.Itoa(i) + ":", strings.Repeat(string(rune('a'+i%26)), i*15), "/end"}
		if i == 100 {
			parts[1] = strings.Repeat("x", textChunk+7)
		}
		runs = append(runs, run{tc.add(parts...), parts})
	}
	if len(tc.chunks) < 3 {
		t.Fatalf("%d chunks for %d KiB; the test should cross chunk boundaries", len(tc.chunks), 200*1500/1024)
	}
	for _, r := range runs {
		off := 0
		for _, p := range r.parts {
			if got := string(tc.bytes(r.at, off, len(p))); got != p {
				t.Fatalf("part at %+v+%d = %.20q..., want %.20q...", r.at, off, got, p)
			}
			off += len(p)
		}
		if got, want := string(tc.bytes(r.at, 0, off)), strings.Join(r.parts, ""); got != want {
			t.Fatalf("run at %+v reads back %.20q..., want %.20q...", r.at, got, want)
		}
	}
	for i, c := range tc.chunks {
		if cap(c) > textChunk && len(c) != cap(c) {
			t.Errorf("chunk %d of its own (cap %d) holds %d bytes: more went into it", i, cap(c), len(c))
		}
	}
}

func TestTextChunksNeverMovesWhatItWrote(t *testing.T) {
	var tc textChunks
	first := tc.add("first")
	b := tc.bytes(first, 0, 5)
	for range 3 * textChunk / 100 {
		tc.add(strings.Repeat("y", 100))
	}
	if &b[0] != &tc.bytes(first, 0, 5)[0] {
		t.Fatal("the first run moved when more were added")
	}
}

func TestRecordsAcrossChunks(t *testing.T) {
	var r records[[2]int64]
	n := int32(3*recordChunk + 5)
	first := r.at(r.add([2]int64{0, 0}))
	for i := int32(1); i < n; i++ {
		if got := r.add([2]int64{int64(i), -int64(i)}); got != i {
			t.Fatalf("add #%d returned %d", i, got)
		}
	}
	if r.len() != n {
		t.Fatalf("len %d, want %d", r.len(), n)
	}
	for i := range n {
		if v := *r.at(i); v != [2]int64{int64(i), -int64(i)} {
			t.Fatalf("at(%d) = %v", i, v)
		}
	}
	r.at(7)[1] = 99
	if r.at(7)[1] != 99 {
		t.Fatal("a value written through at did not stay")
	}
	if first != r.at(0) {
		t.Fatal("the first record moved when more were added")
	}
}

// BenchmarkTextChunks appends 150-byte runs to textChunks and, for
// comparison, to one growing byte slice, which copies everything at each
// growth: the cost textChunks removes from the ledger and the inspector.
//
//	go test -run '^$' -bench TextChunks -benchtime 300000x ./mockserver/
func BenchmarkTextChunks(b *testing.B) {
	s := strings.Repeat("p", 150)
	b.Run("chunks", func(b *testing.B) {
		var tc textChunks
		for range b.N {
			tc.add(s)
		}
	})
	b.Run("one-slice", func(b *testing.B) {
		var text []byte
		for range b.N {
			text = append(text, s...)
		}
		_ = text
	})
}
