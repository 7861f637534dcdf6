package idempotency_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

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
	l := newBenchLoop(t, idempotency.Middleware(newStore(t))(benchApp()))
	l.r.Header.Set(idempotency.HeaderIdempotencyKey, "replay-allocations")
	send := func() { l.run(t, 1, nil) }
	send() // the first execution
	send()
	if l.w.h.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("the second request was not a replay: %v", l.w.h)
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

// A first execution over memstore in lease mode allocates 14 times for a
// 100-byte body, the header value that names its key included (as in
// BenchmarkMiddleware/first). The store calls after the handler run on the
// claim's own context (see storeCtx), which allocates only once a store
// asks for its values or its Done channel, and memstore asks for neither:
// the context.WithoutCancel and context.WithCancel it stands for were 3 of
// 17.
func TestFirstExecutionAllocations(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("allocation counts differ under the race detector (sync.Pool drops what is put back); run without -race")
	}
	l := newBenchLoop(t, idempotency.Middleware(newStore(t))(benchApp()))
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = "first-allocations-" + strconv.Itoa(i)
	}
	next := 0
	send := func() { l.run(t, 1, func() string { next++; return keys[next-1] }) }
	send() // the Middleware's first request sets its epoch
	if n := testing.AllocsPerRun(1000, send); n > 14 {
		t.Errorf("a first execution allocates %.0f times, want at most 14", n)
	}
}
