package testkit

import (
	"bytes"
	"net/http"
	"testing"
)

// BenchPayload is the body of the client-side benchmarks' POSTs.
var BenchPayload = []byte(`{"account":"acc-1","amount":1500}`)

// BenchPOST runs b's loop over one logical POST of BenchPayload to
// http://api.test/v1/debits through rt, reporting allocations and failing
// b unless each answers 201; it closes each response body. rt is meant to
// answer in memory, so that the benchmark measures only what wraps it.
func BenchPOST(b *testing.B, rt http.RoundTripper) {
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", bytes.NewReader(BenchPayload))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d, want 201", resp.StatusCode)
		}
		resp.Body.Close()
	}
}
