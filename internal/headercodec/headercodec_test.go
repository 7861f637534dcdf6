package headercodec

import (
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []http.Header{
		{},
		{"Content-Type": {"application/json"}},
		{"Location": {"/a\x00b"}, "Etag": {"\xff\xfe", "", "\"w/\""}},
		{"X-Bin": {string([]byte{0, 1, 2, 0x80, 0xc3, 0x28, 0xff})}, "\x00Odd name": {"v"}},
		{"X-Sep": {"a, b; c", "d:e{f}", "\r\n"}},
		{"X-Empty": {}},
		{"X-Long": {string(make([]byte, 200)), string(make([]byte, 20000))}, string(make([]byte, 128)): make([]string, 130)},
	}
	for _, h := range tests {
		b := Append(nil, h)
		if n := Len(h); n != len(b) {
			t.Errorf("Len(%q) = %d, want %d", h, n, len(b))
		}
		if !IsEncoded(b) {
			t.Fatalf("Append(%q) = %x: no version byte", h, b)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Append(%q)): %v", h, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Errorf("round trip of %q = %q", h, got)
		}
	}
}

func TestDeterministic(t *testing.T) {
	h := http.Header{"B": {"1"}, "A": {"2", "3"}, "C": {"4"}}
	first := Append(nil, h)
	for range 20 { // map iteration order varies between runs
		if b := Append(nil, h.Clone()); !bytes.Equal(b, first) {
			t.Fatalf("encodings differ: %x and %x", b, first)
		}
	}
}

func TestNilIsEmpty(t *testing.T) {
	if n := Len(nil); n != len(Append(nil, nil)) {
		t.Errorf("Len(nil) = %d, want %d", n, len(Append(nil, nil)))
	}
	got, err := Decode(Append(nil, nil))
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Decode(Append(nil)) = %v, %v; want an empty, non-nil header", got, err)
	}
}

func TestCorrupt(t *testing.T) {
	good := Append(nil, http.Header{"Location": {"/x"}})
	tests := map[string][]byte{
		"empty":           nil,
		"json":            []byte(`{"Location":["/x"]}`),
		"truncated":       good[:len(good)-1],
		"trailing":        append(bytes.Clone(good), 0),
		"huge count":      {Version, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad uvarint":     {Version, 0x80},
		"value past end":  {Version, 1, 1, 'A', 1, 9, 'x'},
		"names past data": {Version, 3, 1, 'A', 0},
	}
	for name, b := range tests {
		if h, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode(%x) = %v, %v; want ErrCorrupt", name, b, h, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, http.Header{"Location": {"/x", "\x00"}}))
	f.Add([]byte{Version, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same header.
		again, err := Decode(Append(nil, h))
		if err != nil || !reflect.DeepEqual(again, h) {
			t.Fatalf("re-encoding %q gave %q, %v", h, again, err)
		}
	})
}

func TestSharedDecodesAsDecode(t *testing.T) {
	s := NewShared()
	encs := [][]byte{
		Append(nil, nil),
		Append(nil, http.Header{"Content-Type": {"application/json"}}),
		Append(nil, http.Header{"A": {"1", "2"}, "B": {"\x00\xff"}}),
		Append(nil, http.Header{"Long": {strings.Repeat("v", sharedMax)}}), // over sharedMax: not kept
	}
	for round := range 2 {
		for i, b := range encs {
			want, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Decode(b)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("round %d, encoding %d: Shared.Decode = %v, %v; want %v", round, i, got, err, want)
			}
		}
	}
	b := encs[1]
	first, _ := s.Decode(b)
	if again, _ := s.Decode(slices.Clone(b)); reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
		t.Error("a second Decode of the same encoding returned a new header; want the one kept")
	}
	for _, bad := range [][]byte{nil, []byte("{}"), {Version, 5}} {
		if _, err := s.Decode(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Shared.Decode(%q) error = %v; want ErrCorrupt", bad, err)
		}
		if _, err := s.Decode(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("second Shared.Decode(%q) error = %v; want ErrCorrupt", bad, err)
		}
	}
}

func TestSharedConcurrent(t *testing.T) {
	s := NewShared()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				v := strings.Repeat("x", (g*500+i)%97)
				h, err := s.Decode(Append(nil, http.Header{"V": {v}}))
				if err != nil || len(h["V"]) != 1 || h["V"][0] != v {
					t.Errorf("Shared.Decode of value %q = %v, %v", v, h, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestSharedKeyedOnWholeEncoding decodes, many times over, encodings
// that agree on their first bytes and differ past them (at sharedMax
// bytes and around it) or in one late byte, more of them than the table
// has slots: each Decode answers its own encoding's header, and one
// longer than sharedMax is never shared.
func TestSharedKeyedOnWholeEncoding(t *testing.T) {
	s := NewShared()
	var encs [][]byte
	for n := sharedMax - 40; n <= sharedMax+40; n++ {
		for _, last := range []string{"a", "b"} {
			v := strings.Repeat("v", n-len(Append(nil, http.Header{"X": {""}}))-1) + last
			if b := Append(nil, http.Header{"X": {v}}); len(b) >= sharedMax-40 {
				encs = append(encs, b)
			}
		}
	}
	for round := range 3 {
		for i, b := range encs {
			want, _ := Decode(b)
			got, err := s.Decode(b)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, encoding %d (%d bytes): %.20q, %v; want its own", round, i, len(b), got["X"], err)
			}
			if len(b) > sharedMax {
				if again, _ := s.Decode(b); reflect.ValueOf(again).UnsafePointer() == reflect.ValueOf(got).UnsafePointer() {
					t.Fatalf("an encoding of %d bytes was shared", len(b))
				}
			}
		}
	}
}
