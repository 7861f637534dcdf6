package retrypolicy

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"007", 7 * time.Second, true},
		{"99999999999999999999999", time.Duration(maxRetryAfterSeconds) * time.Second, true},
		{"Mon, 30 Nov 2026 08:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Monday, 30-Nov-26 08:01:00 GMT", time.Minute, true},     // RFC 850
		{"Mon Nov 30 08:00:05 2026", 5 * time.Second, true},       // asctime
		{"Mon, 30 Nov 2026 07:00:00 GMT", 0, true},                // past
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"10s", 0, false},
		{"soon", 0, false},
		{"30 Nov 2026", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Mon, 30 Nov 2026 08:00:30 GMT", "-1", "", "1e3", "18446744073709551616"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in string) {
		d, ok := parseRetryAfter(in, now)
		if !ok && d != 0 {
			t.Fatalf("%q: not ok but %v", in, d)
		}
		if d < 0 {
			t.Fatalf("%q: negative wait %v", in, d)
		}
		for _, limit := range []time.Duration{time.Second, 30 * time.Second} {
			j := jitterCapped(d, limit, Jitter)
			if j < 0 || j > limit {
				t.Fatalf("%q: jitterCapped(%v, %v) = %v", in, d, limit, j)
			}
			if hi := jitterCapped(d, limit, nil); j > hi || hi > limit {
				t.Fatalf("%q: jitterCapped(%v, %v) = %v, but the longest is %v", in, d, limit, j, hi)
			}
		}
	})
}

func TestJitterCapped(t *testing.T) {
	maxRnd := func(n int64) int64 { return n - 1 }
	zero := func(int64) int64 { return 0 }
	tests := []struct {
		d, limit time.Duration
		rnd      func(int64) int64
		want     time.Duration
	}{
		{10 * time.Second, 30 * time.Second, zero, 10 * time.Second},
		{10 * time.Second, 30 * time.Second, maxRnd, 11 * time.Second},
		{time.Hour, 30 * time.Second, zero, 30 * time.Second},
		{time.Hour, 30 * time.Second, maxRnd, 27 * time.Second},        // jitter taken off at the cap
		{29 * time.Second, 30 * time.Second, maxRnd, 30 * time.Second}, // added up to the cap, never taken off below the cap
		{0, 30 * time.Second, maxRnd, 0},
		{time.Duration(math.MaxInt64), time.Second, zero, time.Second},
		// nil: the longest wait any draw could give.
		{10 * time.Second, 30 * time.Second, nil, 11 * time.Second},
		{29 * time.Second, 30 * time.Second, nil, 30 * time.Second},
		{time.Hour, 30 * time.Second, nil, 30 * time.Second},
		{5 * time.Nanosecond, 30 * time.Second, nil, 5 * time.Nanosecond},
	}
	for _, tt := range tests {
		if got := jitterCapped(tt.d, tt.limit, tt.rnd); got != tt.want {
			t.Errorf("jitterCapped(%v, %v) = %v, want %v", tt.d, tt.limit, got, tt.want)
		}
	}
}

func TestRetryAfterOnlyOnSomeStatuses(t *testing.T) {
	now := time.Now()
	for code, honoured := range map[int]bool{409: true, 429: true, 503: true, 500: false, 502: false, 408: false} {
		resp := &http.Response{StatusCode: code, Header: http.Header{"Retry-After": {"3"}}}
		_, asked, ok := RetryAfter(resp, now, time.Minute, Jitter)
		if ok != honoured || (ok && asked != 3*time.Second) {
			t.Errorf("status %d: ok=%v asked=%v, want honoured=%v", code, ok, asked, honoured)
		}
	}
}
