package saferetry

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAttemptDurations: each attempt reports its round trip, and the time
// of the operation so far, waits included, on fake time.
func TestAttemptDurations(t *testing.T) {
	clk := newFakeClock()
	statuses := []int{503, 201}
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		clk.advance(30 * time.Millisecond)
		s := statuses[min(n, len(statuses)-1)]
		n++
		return &http.Response{StatusCode: s, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	var got []Attempt
	tr := NewTransport(base, withClock(clk), WithBackoff(constBackoff(time.Millisecond)),
		WithHook(func(a Attempt) { got = append(got, a) }))
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test/v1/debits", strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 2 {
		t.Fatalf("attempts %+v", got)
	}
	for i, want := range []struct{ d, e time.Duration }{{30 * time.Millisecond, 30 * time.Millisecond}, {30 * time.Millisecond, 61 * time.Millisecond}} {
		if got[i].Duration != want.d || got[i].Elapsed != want.e {
			t.Errorf("attempt %d: Duration %v Elapsed %v, want %v %v", i+1, got[i].Duration, got[i].Elapsed, want.d, want.e)
		}
	}
}
