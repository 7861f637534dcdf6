package mockserver

import "testing"

// TestMediaTypeAcceptedWithoutAllocating: the checks every payment goes
// through allocate nothing for what nearly every client sends (the mock
// server's throughput is measured against a trivial server's).
func TestMediaTypeAcceptedWithoutAllocating(t *testing.T) {
	for _, ct := range [][]string{nil, {"application/json"}, {"application/json; charset=utf-8"}} {
		if why := mediaTypeRefusal(ct); why != "" {
			t.Fatalf("mediaTypeRefusal(%q) = %q, want it taken", ct, why)
		}
		if n := testing.AllocsPerRun(100, func() { mediaTypeRefusal(ct); codingRefusal(nil) }); n != 0 {
			t.Errorf("mediaTypeRefusal(%q): %v allocations, want 0", ct, n)
		}
	}
}
