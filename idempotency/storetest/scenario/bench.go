package scenario

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// WarmUpRequests is how many requests ParallelFirstExecutions sends before
// it starts the timer, to open connections and prepare statements.
const WarmUpRequests = 8

// ParallelFirstExecutions measures whole protected requests through the
// Middleware over store from b.RunParallel goroutines, without the network:
// every request carries a new key, so each one claims, runs a small JSON
// handler and completes. Stores call it from their BenchmarkMiddlewareParallel
// so that one `go test -bench MiddlewareParallel ./idempotency/...` run puts
// them side by side. It returns the number of requests served, the
// WarmUpRequests sent before the timer starts included, for stores that
// report round trips per request.
func ParallelFirstExecutions(b *testing.B, store idempotency.Store, opts ...idempotency.Option) int64 {
	h := idempotency.Middleware(store, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"pay_123","amount":1000,"currency":"EUR","status":"succeeded"}`))
	}))
	prefix := testenv.RandomName("bench-") + "-"
	var seq atomic.Int64
	serve := func() bool {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1000,"currency":"EUR","recipient":"user_42"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderIdempotencyKey, prefix+strconv.FormatInt(seq.Add(1), 10))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			b.Errorf("scenario: benchmark request answered %d %q", w.Code, w.Body)
			return false
		}
		return true
	}
	for range WarmUpRequests {
		serve()
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !serve() {
				return
			}
		}
	})
	b.StopTimer()
	return seq.Load()
}
