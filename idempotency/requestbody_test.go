package idempotency_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// A Content-Length at the limit with a short body: the Middleware reads
// what arrives (here 2 bytes), so it runs the handler, and reserves memory
// for the bytes that came, not for the length the client announced. With
// no limit to speak of (math.MaxInt64), such a length made it panic.
func TestAnnouncedLengthReservesNoMemory(t *testing.T) {
	for _, limit := range []int64{1 << 30, math.MaxInt64} {
		c := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithMaxRequestBody(limit))(c)
		r := httptest.NewRequest(http.MethodPost, "/ops", strings.NewReader(`{}`))
		r.Header.Set(idempotency.HeaderIdempotencyKey, "k-big")
		r.ContentLength = limit
		w := httptest.NewRecorder()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("limit %d: the Middleware panicked on Content-Length %d: %v", limit, r.ContentLength, p)
				}
			}()
			h.ServeHTTP(w, r)
		}()
		runtime.ReadMemStats(&after)
		if w.Code != http.StatusCreated || c.calls.Load() != 1 {
			t.Errorf("limit %d: status %d, %d runs; want the 2-byte body run once", limit, w.Code, c.calls.Load())
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("limit %d: %d bytes allocated for a 2-byte body announced as %d", limit, n, r.ContentLength)
		}
	}
}
