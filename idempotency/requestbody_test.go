package idempotency_test

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// A Content-Length at the limit with a short body: the Middleware reads
// what arrives (here 2 bytes), so it runs the handler, and reserves at most
// 1 MiB (the default limit) before bytes come, not the length the client
// announced. With
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
		if n := after.TotalAlloc - before.TotalAlloc; n > 2<<20 {
			t.Errorf("limit %d: %d bytes allocated for a 2-byte body announced as %d", limit, n, r.ContentLength)
		}
	}
}

// bodyCost is what one replay of a request whose body has size bytes
// (with an exact Content-Length) costs: allocations and bytes allocated.
func bodyCost(t *testing.T, size int) (allocs float64, bytesPer uint64) {
	t.Helper()
	h := idempotency.Middleware(newStore(t), idempotency.WithMaxRequestBody(8<<20))(benchApp())
	body := bytes.Repeat([]byte{'a'}, size)
	r, err := http.NewRequest(http.MethodPost, "http://example.com/payments", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Set(idempotency.HeaderIdempotencyKey, "k-body-"+strconv.Itoa(size))
	rb := &rewindBody{}
	w := &discardWriter{h: make(http.Header)}
	send := func() {
		rb.Reset(body)
		r.Body, r.ContentLength = rb, int64(size)
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, r)
		if w.status != http.StatusCreated {
			t.Fatalf("status %d", w.status)
		}
	}
	send() // the first execution; the rest are replays
	send()
	if w.h.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("not a replay: %v", w.h)
	}
	allocs = testing.AllocsPerRun(50, send)
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		send()
	}
	runtime.ReadMemStats(&after)
	return allocs, (after.TotalAlloc - before.TotalAlloc) / runs
}

// A body with an exact Content-Length up to the default limit (1 MiB) is
// read into one buffer of its size; a larger one, under a larger limit,
// into a buffer that doubles up to its size (1, 2, then 3 MiB): a few
// allocations more, and bytes allocated within about twice its size.
func TestKnownLengthBodyBuffers(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	small, _ := bodyCost(t, 1<<10)
	for _, c := range []struct {
		size      int
		allocs    float64 // more than a 1 KiB body's
		maxFactor uint64
	}{{100 << 10, 0, 1}, {1 << 20, 0, 1}, {3 << 20, 5, 2}} {
		// 3 MiB: 2 more with the collector off (GOGC=off: 7), up to 5 more
		// with it on, since the many collections 6 MiB a replay starts
		// empty the middleware's buffer pools, which are then filled anew
		// (seen: 8 to 10). The bytes, bounded below, are what tell a
		// buffer that grows in a few steps from one that grows in many.
		allocs, perOp := bodyCost(t, c.size)
		t.Logf("body %d B: %.0f allocs (1 KiB body: %.0f), %d B allocated per replay", c.size, allocs, small, perOp)
		if allocs > small+c.allocs {
			t.Errorf("body %d B with Content-Length: %.0f allocations per replay, %.0f for a 1 KiB body", c.size, allocs, small)
		}
		if perOp > c.maxFactor*uint64(c.size)+uint64(c.size)/4+4096 {
			t.Errorf("body %d B with Content-Length: %d bytes allocated per replay, want at most about %d times its size", c.size, perOp, c.maxFactor)
		}
	}
}
