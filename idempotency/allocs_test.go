package idempotency_test

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// rewindBody is a request body that a test reads again and again without
// allocating.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// A replay over memstore in lease mode allocates its request state (256
// bytes), the body it read, the fingerprint and the array of header values
// it writes: 4 allocations, at most 512 bytes for a 100-byte body. Lease
// mode's hold of a claim (another 256 bytes) is made only for a claim
// acquired, never for a replay (TestLeaseClaimOnlyWhenAcquired checks that
// under the race detector too, where this test cannot count).
func TestReplayAllocations(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("allocation counts differ under the race detector (sync.Pool drops what is put back); run without -race")
	}
	h := idempotency.Middleware(newStore(t))(benchApp())
	r, err := http.NewRequest(http.MethodPost, "http://example.com/payments", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idempotency.HeaderIdempotencyKey, "replay-allocations")
	body := &rewindBody{}
	w := &discardWriter{h: make(http.Header)}
	send := func() {
		body.Reset(benchBody)
		r.Body, r.ContentLength = body, int64(len(benchBody))
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, r)
		if w.status != http.StatusCreated {
			t.Fatalf("status %d", w.status)
		}
	}
	send() // the first execution
	send()
	if w.h.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("the second request was not a replay: %v", w.h)
	}
	if n := testing.AllocsPerRun(1000, send); n > 4 {
		t.Errorf("a replay allocates %.0f times, want at most 4", n)
	}
	const runs = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		send()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 512 {
		t.Errorf("a replay allocates %d bytes, want at most 512", per)
	}
}
