package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(lat, 0.50); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := percentile(lat, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("p99 of nothing = %v", got)
	}
}

// Every answer counted passed OK and reached the server, from every
// worker; an answer that fails OK is counted apart and named.
func TestRunCountsWhatTheServerAnswered(t *testing.T) {
	var served atomic.Int64
	var workers [4]atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.URL.Query().Get("w") != "" {
			workers[r.URL.Query().Get("w")[0]-'0'].Add(1)
		}
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	target := func(path string) Target {
		return Target{Name: path, Request: func(w, i int) (*http.Request, error) {
			return http.NewRequest(http.MethodGet, srv.URL+path+"?w="+string(rune('0'+w)), nil)
		}}
	}
	res := Run(context.Background(), srv.Client(), target("/ok"), 4, 100*time.Millisecond)
	if res.Requests == 0 || res.Failed != 0 || res.Err != nil || int64(res.Requests) > served.Load() {
		t.Fatalf("ok run: %+v, server saw %d", res, served.Load())
	}
	for w := range workers {
		if workers[w].Load() == 0 {
			t.Errorf("worker %d sent nothing", w)
		}
	}
	if res.P50 <= 0 || res.P99 < res.P50 || res.RPS() <= 0 {
		t.Errorf("figures: %+v, %.0f req/s", res, res.RPS())
	}
	bad := Run(context.Background(), srv.Client(), target("/bad"), 2, 50*time.Millisecond)
	if bad.Requests != 0 || bad.Failed == 0 || bad.Err == nil || !strings.Contains(bad.Err.Error(), "418") {
		t.Fatalf("failing run: %+v", bad)
	}
	// Rounds long enough for a request to be answered under the race
	// detector on a loaded machine: at 20 ms a round of the target once
	// answered none (CI, 2026-12-05).
	const round = 150 * time.Millisecond
	_, err := Compare(context.Background(), srv.Client(), target("/ok"), target("/bad"), 2, 3, round)
	if err == nil || !strings.Contains(err.Error(), "/bad") {
		t.Fatalf("Compare over a failing target: %v", err)
	}
	c, err := Compare(context.Background(), srv.Client(), target("/ok"), target("/ok"), 2, 3, round)
	if err != nil || c.Rounds != 3 || c.Ratio <= 0 || c.Anchor.Requests == 0 || c.Target.Requests == 0 {
		t.Fatalf("Compare: %+v, %v", c, err)
	}
}
