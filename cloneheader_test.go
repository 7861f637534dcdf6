package saferetry

import (
	"fmt"
	"net/http"
	"testing"
)

// TestAttemptHeaderAddKeepsCallersValues: the attempt's header shares the
// caller's value slices, clipped, so that an Add on it (by a base that
// breaks the RoundTripper contract, or a hook) appends to a slice of its
// own and never writes into the spare capacity of the caller's: for
// headers of up to 8 entries with the key, once copied by maps.Clone,
// and larger ones.
func TestAttemptHeaderAddKeepsCallersValues(t *testing.T) {
	for _, n := range []int{1, 7, 8, 12} {
		h := http.Header{}
		for i := range n {
			name := http.CanonicalHeaderKey("x-h" + string(rune('a'+i)))
			vv := make([]string, 1, 4) // spare capacity an append would write into
			vv[0] = "v"
			h[name] = vv
		}
		for _, wire := range []string{"", "key-1"} {
			h2 := cloneHeader(h, []string{wire})
			if want := n + min(len(wire), 1); len(h2) != want {
				t.Fatalf("%d headers, key %q: the copy has %d entries, want %d", n, wire, len(h2), want)
			}
			for name := range h {
				h2.Add(name, "added")
			}
			for name, vv := range h {
				if full := vv[:2]; full[1] != "" {
					t.Errorf("%d headers, key %q: an Add on the copy wrote %q into the caller's %s", n, wire, full[1], name)
				}
				if got := h2[name]; len(got) != 2 || got[0] != "v" || got[1] != "added" {
					t.Errorf("%d headers, key %q: the copy's %s is %q", n, wire, name, got)
				}
			}
			if got := h2.Get(HeaderIdempotencyKey); got != wire {
				t.Errorf("%d headers: the copy's key is %q, want %q", n, got, wire)
			}
		}
	}
}

// TestAttemptHeaderCostsNotCallersCapacity: the attempt's header costs
// what the caller's header holds, not the room its map was made with
// (make(http.Header, 64) for a client's default headers) or kept after
// most of its entries were deleted (an inbound request's header cut down
// to what is forwarded): every attempt copies it. maps.Clone copies a
// map's whole storage, 98 KB a copy for three headers in a map made for
// 1024.
func TestAttemptHeaderCostsNotCallersCapacity(t *testing.T) {
	three := func(h http.Header) http.Header {
		h["Content-Type"] = []string{"application/json"}
		h["Authorization"] = []string{"Bearer x"}
		h["Accept"] = []string{"application/json"}
		return h
	}
	shrunk := http.Header{}
	for i := range 24 {
		shrunk[fmt.Sprintf("X-H%02d", i)] = []string{"v"}
	}
	for i := range 24 {
		delete(shrunk, fmt.Sprintf("X-H%02d", i))
	}
	wire := []string{"key-1"}
	var sink http.Header
	cost := func(h http.Header) float64 {
		return testing.AllocsPerRun(100, func() { sink = cloneHeader(h, wire) })
	}
	want := cost(three(http.Header{}))
	for name, h := range map[string]http.Header{
		"in a map made for 64":   three(make(http.Header, 64)),
		"in a map made for 1024": three(make(http.Header, 1024)),
		"in a map that held 24":  three(shrunk),
	} {
		if got := cost(h); got > want {
			t.Errorf("three headers %s cost %.0f allocations a copy; want %.0f, as in a map made for three", name, got, want)
		}
	}
	_ = sink
}
