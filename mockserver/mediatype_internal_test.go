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

// TestCommonJSONAgreesWithParse: the allocation-free path takes exactly
// what the full parse takes among the spellings it looks at.
func TestCommonJSONAgreesWithParse(t *testing.T) {
	for _, ct := range []string{
		"application/json", "Application/JSON", "application/json ", "application/json;charset=utf-8",
		"application/json; charset=UTF-8", "application/json ;  charset=utf-8  ", "application/json; charset=utf-8;",
		"application/jsonx", "application/json; charset=utf-16", "application/json; charset=utf-8x",
		"application/json; charset=\"utf-8\"", "application/json; foo=bar", "application/json;", "text/json",
	} {
		fast := commonJSON(ct)
		full := ct != "" && parsedRefusal(ct) == ""
		if fast && !full {
			t.Errorf("commonJSON(%q) takes what the parse refuses", ct)
		}
		if got := mediaTypeRefusal([]string{ct}) == ""; got != full {
			t.Errorf("mediaTypeRefusal(%q) takes it: %v, the parse alone: %v", ct, got, full)
		}
	}
}
