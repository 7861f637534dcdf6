package memstore

import (
	"context"
	"errors"
	"iter"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newFake(t *testing.T, opts ...Option) (*Store, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := New(append([]Option{WithClock(clk.Now), WithCleanupInterval(0)}, opts...)...)
	t.Cleanup(func() { s.Close() })
	return s, clk
}

func (s *Store) count() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].m)
		s.shards[i].mu.Unlock()
	}
	return n
}

func TestLeaseAndTTLOnFakeClock(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t)
	k := idempotency.Key{Scope: "s", Key: "k"}

	r1, err := s.Claim(ctx, k, "fp", time.Second, time.Minute)
	if err != nil || !r1.Acquired || r1.LeaseRemaining != time.Second {
		t.Fatalf("first claim = %+v, %v; want acquired with the whole 1s lease left", r1, err)
	}
	clk.Advance(999 * time.Millisecond)
	r, _ := s.Claim(ctx, k, "fp", time.Second, time.Minute)
	if r.Acquired || r.Entry.LeaseRemaining != time.Millisecond {
		t.Fatalf("claim before lapse = %+v, want blocked with 1ms left", r)
	}
	clk.Advance(time.Millisecond)
	r2, _ := s.Claim(ctx, k, "fp", time.Second, time.Minute)
	if !r2.Acquired || !r2.TookOver || r2.Token <= r1.Token || r2.LeaseRemaining != time.Second {
		t.Fatalf("claim at lapse = %+v, want takeover with token > %d and the whole 1s lease left", r2, r1.Token)
	}
	if err := s.Complete(ctx, k, r1.Token, idempotency.Response{Status: 200}, time.Minute); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("late Complete = %v, want ErrStaleToken", err)
	}
	// The takeover restarted the ttl: the entry outlives the first claim's ttl.
	clk.Advance(59 * time.Second)
	if _, found, _ := s.Get(ctx, k); !found {
		t.Fatal("entry gone before its ttl from the takeover")
	}
	if err := s.Complete(ctx, k, r2.Token, idempotency.Response{Status: 201}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	e, found, _ := s.Get(ctx, k)
	if !found || e.State != idempotency.StateCompleted || e.LeaseRemaining != 0 || e.Response.Status != 201 {
		t.Fatalf("Get before expiry = %+v, %v", e, found)
	}
	clk.Advance(time.Nanosecond)
	if _, found, _ := s.Get(ctx, k); found {
		t.Fatal("entry found at its expiry")
	}
	if n := s.count(); n != 0 {
		t.Fatalf("lazy expiry left %d entries", n)
	}
}

func TestResponseIsCopied(t *testing.T) {
	ctx := context.Background()
	s, _ := newFake(t)
	k := idempotency.Key{Key: "k"}
	r, _ := s.Claim(ctx, k, "fp", time.Second, time.Minute)
	resp := idempotency.Response{Status: 200, Header: http.Header{"A": {"1"}}, Body: []byte("abc")}
	if err := s.Complete(ctx, k, r.Token, resp, time.Minute); err != nil {
		t.Fatal(err)
	}
	resp.Header["A"][0] = "changed"
	resp.Body[0] = 'X'
	e, _, _ := s.Get(ctx, k)
	e.Response.Header.Set("A", "mutated")
	e.Response.Body[1] = 'Y'
	e2, _, _ := s.Get(ctx, k)
	if got := e2.Response.Header.Get("A"); got != "1" {
		t.Errorf("header = %q, want 1", got)
	}
	if got := string(e2.Response.Body); got != "abc" {
		t.Errorf("body = %q, want abc", got)
	}
}

func TestNonPositiveDurations(t *testing.T) {
	ctx := context.Background()
	s, _ := newFake(t)
	k := idempotency.Key{Key: "k"}
	if _, err := s.Claim(ctx, k, "fp", 0, time.Minute); err == nil {
		t.Error("Claim with zero lease succeeded")
	}
	if _, err := s.Claim(ctx, k, "fp", time.Second, -1); err == nil {
		t.Error("Claim with negative ttl succeeded")
	}
	if _, found, _ := s.Get(ctx, k); found {
		t.Error("refused Claim left an entry")
	}
}

// sweepAfter moves clk on by d, sweeps s as the background loop would
// then, and fails unless want entries are left.
func sweepAfter(t *testing.T, s *Store, clk *fakeClock, d time.Duration, want int) {
	t.Helper()
	clk.Advance(d)
	s.sweep(clk.Now())
	if n := s.count(); n != want {
		t.Errorf("count after a sweep %v on = %d, want %d", d, n, want)
	}
}

func TestSweep(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t)
	for i := range 200 {
		k := idempotency.Key{Scope: "s", Key: string(rune('a'+i%26)) + string(rune(i))}
		ttl := time.Minute
		if i%2 == 0 {
			ttl = time.Hour
		}
		if _, err := s.Claim(ctx, k, "fp", time.Second, ttl); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.count(); n != 200 {
		t.Fatalf("count = %d, want 200", n)
	}
	sweepAfter(t, s, clk, time.Minute, 100)
}

func TestSweepLoopRunsAndCloseStopsIt(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t, WithCleanupInterval(2*time.Millisecond))
	if _, err := s.Claim(ctx, idempotency.Key{Key: "k"}, "fp", time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	testenv.Eventually(t, "the background sweep removes the expired entry", func() bool { return s.count() == 0 })
	closed := make(chan struct{})
	go func() { s.Close(); s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	select {
	case <-s.done:
	default:
		t.Fatal("sweep goroutine still running after Close")
	}
}

func TestCancelledContext(t *testing.T) {
	s, _ := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := idempotency.Key{Key: "k"}
	if _, err := s.Claim(ctx, k, "fp", time.Second, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Claim = %v, want context.Canceled", err)
	}
	if _, found, _ := s.Get(context.Background(), k); found {
		t.Error("cancelled Claim left an entry")
	}
}

// TestSweepVisitsOnlyDueExpiries: the sweep must not walk live entries under
// a shard lock; it examines due expiries only, including the stale ones left
// by a Complete that pushed an entry's expiry back.
func TestSweepVisitsOnlyDueExpiries(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t)
	claim := func(k idempotency.Key, ttl time.Duration) int64 {
		t.Helper()
		r, err := s.Claim(ctx, k, "fp", time.Second, ttl)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim(%v) = %+v, %v", k, r, err)
		}
		return r.Token
	}
	for i := range 1000 {
		claim(idempotency.Key{Scope: "live", Key: strconv.Itoa(i)}, time.Hour)
	}
	for i := range 10 {
		claim(idempotency.Key{Scope: "due", Key: strconv.Itoa(i)}, time.Second)
	}
	for i := range 5 { // claimed with a short ttl, completed with a long one
		k := idempotency.Key{Scope: "kept", Key: strconv.Itoa(i)}
		if err := s.Complete(ctx, k, claim(k, time.Second), idempotency.Response{Status: 201}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// Claimed with a long ttl, completed with a short one: the short one
	// counts.
	short := idempotency.Key{Scope: "short", Key: "0"}
	if err := s.Complete(ctx, short, claim(short, time.Hour), idempotency.Response{Status: 201}, time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	var removed, examined int
	for i := range s.shards {
		r, e, more := s.shards[i].sweepExpired(clk.Now(), sweepBatch)
		if more {
			t.Errorf("shard %d: due expiries left after one batch of %d", i, sweepBatch)
		}
		removed += r
		examined += e
	}
	if n := s.count(); n != 1005 {
		t.Errorf("count after sweep = %d, want 1005", n)
	}
	if removed != 11 || examined != 16 {
		t.Errorf("sweep removed %d and examined %d, want 11 removed and 16 examined (not the 1000 live entries)", removed, examined)
	}
	// The completed entries went back into the heap at their new expiry.
	sweepAfter(t, s, clk, time.Hour, 0)
}

// TestSweepBatchBounded: one hold of a shard lock handles at most the batch.
func TestSweepBatchBounded(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t)
	target := s.shardFor(idempotency.Key{Key: "0"})
	var keys []idempotency.Key
	for i := 0; len(keys) < 10; i++ {
		if k := (idempotency.Key{Key: strconv.Itoa(i)}); s.shardFor(k) == target {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if _, err := s.Claim(ctx, k, "fp", time.Second, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	removed, examined, more := target.sweepExpired(clk.Now(), 3)
	if removed != 3 || examined != 3 || !more {
		t.Fatalf("sweepExpired(limit 3) = %d removed, %d examined, more %v; want 3, 3, true", removed, examined, more)
	}
	sweepAfter(t, s, clk, 0, 0)
}

func TestExpiryHeapOrder(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var h expiryHeap
	offsets := []int{5, 3, 9, 1, 1, 7, 0, 8, 2, 6, 4, 3}
	for i, o := range offsets {
		h.push(expiry{at: base.Add(time.Duration(o) * time.Second).UnixNano(), key: idempotency.Key{Key: strconv.Itoa(i)}})
	}
	var last int64
	for n := 0; len(h) > 0; n++ {
		it := h.pop()
		if it.at < last {
			t.Fatalf("pop %d gave %v after %v", n, it.at, last)
		}
		last = it.at
	}
}

// len is how many expiries q holds.
func (q *expiryQueue) len() int { return q.run.len() + len(q.heap) }

// all yields every expiry in q, in no particular order (checkBudget counts
// their bytes).
func (q *expiryQueue) all() iter.Seq[expiry] {
	return func(yield func(expiry) bool) {
		for x := range q.run.all() {
			if !yield(x) {
				return
			}
		}
		for _, x := range q.heap {
			if !yield(x) {
				return
			}
		}
	}
}

// all yields every expiry in r, front first.
func (r *expiryRun) all() iter.Seq[expiry] {
	return func(yield func(expiry) bool) {
		for i, c := range r.chunks {
			if i == 0 {
				c = c[r.head:]
			}
			for _, x := range c {
				if !yield(x) {
					return
				}
			}
		}
	}
}

// TestShardSize: a shard fills whole pairs of cache lines (see the
// padding at its end), two on 64-bit platforms.
func TestShardSize(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size%128 != 0 || (unsafe.Sizeof(uintptr(0)) == 8 && size != 128) {
		t.Errorf("a shard is %d bytes, want a multiple of 128 (128 on 64-bit platforms)", size)
	}
}

// TestClockOutOfRange: the store counts time in an int64 from its clock's
// reading in New. A reading more than about 292 years away, such as a
// fake clock that read the zero time in New and a real date later, makes
// every call fail, where counting it would saturate: every lease lapsed
// at birth (a duplicate claim acquires beside the holder) or none ever.
func TestClockOutOfRange(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name             string
		start, out, back time.Time
	}{
		{"forward", time.Time{}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{}.Add(30 * time.Second)},
		{"back", time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1492, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(1800, 1, 1, 0, 0, 30, 0, time.UTC)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{t: tt.start}
			s := New(WithClock(clk.Now), WithCleanupInterval(0))
			k := idempotency.Key{Key: "k"}
			held, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || !held.Acquired {
				t.Fatalf("Claim in range = %+v, %v", held, err)
			}
			clk.t = tt.out
			if r, err := s.Claim(ctx, idempotency.Key{Key: "other"}, "fp", time.Minute, time.Hour); !errors.Is(err, errClockRange) || r.Acquired {
				t.Fatalf("Claim out of range = %+v, %v; want errClockRange", r, err)
			}
			if r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); !errors.Is(err, errClockRange) || r.Acquired {
				t.Fatalf("Claim of the held key out of range = %+v, %v; want errClockRange", r, err)
			}
			if err := s.Renew(ctx, k, held.Token, time.Minute); !errors.Is(err, errClockRange) {
				t.Fatalf("Renew out of range = %v; want errClockRange", err)
			}
			if err := s.Complete(ctx, k, held.Token, idempotency.Response{Status: 201}, time.Hour); !errors.Is(err, errClockRange) {
				t.Fatalf("Complete out of range = %v; want errClockRange", err)
			}
			if _, _, err := s.Get(ctx, k); !errors.Is(err, errClockRange) {
				t.Fatalf("Get out of range = %v; want errClockRange", err)
			}
			s.sweep(clk.Now())
			if n := s.count(); n != 1 {
				t.Fatalf("the sweep out of range left %d entries; want the held one", n)
			}
			// Back in range, 30s after the claim, it is held as it was.
			clk.t = tt.back
			if r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); err != nil || r.Acquired {
				t.Fatalf("Claim back in range = %+v, %v; want the key held", r, err)
			}
			if err := s.Complete(ctx, k, held.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
				t.Fatalf("Complete back in range: %v", err)
			}
		})
	}
}

// TestExpiryQueueOrder pushes expiries mostly in order, some out of order
// (a shorter ttl than the keys before), with pops in between, and checks
// that the queue gives them back soonest first, all of them, and that a
// drained queue keeps at most one chunk.
func TestExpiryQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q expiryQueue
	var want []int64 // what the queue holds, sorted
	clock := int64(0)
	popOne := func(step int) {
		t.Helper()
		if !q.due(want[0]) || q.due(want[0]-1) {
			t.Fatalf("step %d: due(%d) and due(%d) do not place the soonest expiry at %d", step, want[0], want[0]-1, want[0])
		}
		got := q.pop()
		if got.at != want[0] || got.key.Key != strconv.FormatInt(got.at, 10) {
			t.Fatalf("step %d: pop gave %d (key %q), want %d", step, got.at, got.key.Key, want[0])
		}
		want = want[1:]
	}
	for step := range 20000 {
		switch r := rng.IntN(10); {
		case r < 6 || len(want) == 0: // the usual: a later expiry than any before
			clock += int64(rng.IntN(3))
			at := clock + 1000
			q.push(expiry{at: at, key: idempotency.Key{Key: strconv.FormatInt(at, 10)}})
			want = append(want, at)
		case r < 7: // a shorter ttl
			at := clock + int64(rng.IntN(1000))
			q.push(expiry{at: at, key: idempotency.Key{Key: strconv.FormatInt(at, 10)}})
			want = append(want, at)
		default:
			popOne(step)
		}
		slices.Sort(want)
		if q.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(want))
		}
	}
	held := slices.Sorted(func(yield func(int64) bool) {
		for x := range q.all() {
			if !yield(x.at) {
				return
			}
		}
	})
	if !slices.Equal(held, want) {
		t.Fatalf("all yields %d expiries that differ from the %d pushed and not popped", len(held), len(want))
	}
	for len(want) > 0 {
		popOne(-1)
	}
	if q.len() != 0 || q.due(math.MaxInt64) || len(q.run.chunks) > 1 || len(q.heap) != 0 {
		t.Fatalf("drained: len %d, due %v, %d chunks, heap %d; want 0, false, at most 1, 0",
			q.len(), q.due(math.MaxInt64), len(q.run.chunks), len(q.heap))
	}
}

// TestExpiryRunChunks: a run's chunks start small and grow to runChunk, a
// full chunk is never copied, and popped items hold no key.
func TestExpiryRunChunks(t *testing.T) {
	var r expiryRun
	const n = 1000
	for i := range n {
		r.push(expiry{at: int64(i), key: idempotency.Key{Key: "k"}})
	}
	var caps []int
	for _, c := range r.chunks {
		caps = append(caps, cap(c))
	}
	if caps[0] != runFirstChunk || caps[1] != 2*runFirstChunk || slices.Max(caps) != runChunk {
		t.Fatalf("chunk capacities %v; want %d, %d, ... up to %d", caps, runFirstChunk, 2*runFirstChunk, runChunk)
	}
	dropped, first := r.chunks[0], &r.chunks[1][0]
	for range runFirstChunk {
		r.pop()
	}
	for i, x := range dropped {
		if x.key.Key != "" {
			t.Fatalf("popped item %d still holds its key %q", i, x.key.Key)
		}
	}
	if &r.chunks[0][0] != first {
		t.Fatal("the second chunk moved when the first was dropped")
	}
	if r.len() != n-runFirstChunk {
		t.Fatalf("len %d, want %d", r.len(), n-runFirstChunk)
	}
}

// TestRenewKeepsHeldEntryAlive: a claim whose holder keeps renewing must not
// expire under it when the handler outlives the ttl; else a duplicate would
// acquire the key anew and run while the first still does.
func TestRenewKeepsHeldEntryAlive(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t)
	k := idempotency.Key{Key: "long-handler"}
	r, err := s.Claim(ctx, k, "fp", time.Second, 2*time.Second)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	for range 5 { // the holder renews every 500ms for 2.5s, past the ttl
		clk.Advance(500 * time.Millisecond)
		if err := s.Renew(ctx, k, r.Token, time.Second); err != nil {
			t.Fatalf("Renew at %v: %v", clk.Now(), err)
		}
	}
	dup, err := s.Claim(ctx, k, "fp", time.Second, 2*time.Second)
	if err != nil || dup.Acquired {
		t.Fatalf("Claim while the holder renews past the ttl = %+v, %v; want blocked", dup, err)
	}
	s.sweep(clk.Now())
	if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatalf("Complete by the renewing holder: %v", err)
	}
	// Once the holder stops renewing, the entry expires with its lease.
	k2 := idempotency.Key{Key: "abandoned"}
	r2, _ := s.Claim(ctx, k2, "fp", time.Second, 2*time.Second)
	if err := s.Renew(ctx, k2, r2.Token, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second)
	s.sweep(clk.Now())
	if _, found, _ := s.Get(ctx, k2); found {
		t.Error("an abandoned claim outlived both its ttl and its last lease")
	}
}
