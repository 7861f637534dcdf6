package mockserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/mockserver"
)

// TestAttemptTiming: each attempt in a key's history says when it arrived
// (before injected latency) and how long its answer took (latency and an
// injected delay included), in Go and over the admin API.
func TestAttemptTiming(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	const latency, delay = 20 * time.Millisecond, 40 * time.Millisecond
	srv.SetLatency(latency)
	srv.DelayNext(1, delay)
	before := time.Now()
	mustSend(t, srv, "POST", "/payments", "timed", payBody)
	mustSend(t, srv, "POST", "/payments", "timed", payBody)
	srv.ClearFaults()

	h := srv.Stats("timed").History
	if len(h) != 2 {
		t.Fatalf("History = %+v, want 2 attempts", h)
	}
	first, second := h[0], h[1]
	if first.At.Before(before.Add(-time.Second)) || first.At.After(second.At) || first.At.Location() != time.UTC {
		t.Errorf("arrivals %v then %v, want in order, in UTC, after %v", first.At, second.At, before)
	}
	if first.Duration < latency+delay {
		t.Errorf("the delayed execution took %v, want at least its latency and delay %v", first.Duration, latency+delay)
	}
	if second.Duration < latency {
		t.Errorf("the replay took %v, want at least the latency %v: its arrival is before the latency", second.Duration, latency)
	}
	if ms := float64(first.Duration) / float64(time.Millisecond); first.DurationMS != ms {
		t.Errorf("DurationMS = %v, want %v", first.DurationMS, ms)
	}

	resp, b := mustSend(t, srv, "GET", "/_mock/keys/"+url.PathEscape("timed"), "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET key: %d %s", resp.StatusCode, b)
	}
	var raw struct {
		History []map[string]json.RawMessage `json:"history"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.History) != 2 {
		t.Fatalf("GET key: %s (%v)", b, err)
	}
	for _, field := range []string{"at", "duration_ms"} {
		if _, ok := raw.History[0][field]; !ok {
			t.Errorf("an attempt over HTTP has no %q: %s", field, b)
		}
	}
	if got := decodeJSON[mockserver.KeyStats](t, b).History[0]; !got.At.Equal(first.At) || got.DurationMS != first.DurationMS {
		t.Errorf("over HTTP: %+v, want %+v", got, first)
	}
}

// TestMetricsHandler: WithMetricsHandler serves its handler at GET
// /metrics, without the injected latency; without it /metrics is a 404
// problem as before.
func TestMetricsHandler(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "saferetry_server_requests_total 0\n")
	})
	srv := mockserver.New(mockserver.WithMetricsHandler(metrics))
	defer srv.Close()
	srv.SetLatency(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+mockserver.MetricsPath, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /metrics under an hour of latency: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "saferetry_server_requests_total 0\n" {
		t.Errorf("GET /metrics = %d %q", resp.StatusCode, b)
	}
	srv.ClearFaults()
	resp, b = mustSend(t, srv, "POST", mockserver.MetricsPath, "", "")
	wantProblem(t, resp, b, http.StatusMethodNotAllowed, mockserver.ProblemMethodNotAllowed)

	plain := mockserver.New()
	defer plain.Close()
	resp, b = mustSend(t, plain, "GET", mockserver.MetricsPath, "", "")
	wantProblem(t, resp, b, http.StatusNotFound, mockserver.ProblemNotFound)
}

// TestHandlerMiddleware: the middleware of WithHandlerMiddleware wraps the
// payment handler under the claim: it sees each execution with its key in
// the context, and no replay.
func TestHandlerMiddleware(t *testing.T) {
	var runs, keyed atomic.Int64
	mw := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			if k, ok := idempotency.KeyFromContext(r.Context()); ok && k == "wrapped" {
				keyed.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := mockserver.New(mockserver.WithHandlerMiddleware(mw))
	defer srv.Close()
	for range 2 {
		if resp, b := mustSend(t, srv, "POST", "/payments", "wrapped", payBody); resp.StatusCode != 201 {
			t.Fatalf("POST: %d %s", resp.StatusCode, b)
		}
	}
	if runs.Load() != 1 || keyed.Load() != 1 || srv.Executions("wrapped") != 1 {
		t.Errorf("the middleware ran %d times (%d with the key), executions %d; want 1, 1, 1",
			runs.Load(), keyed.Load(), srv.Executions("wrapped"))
	}
}
