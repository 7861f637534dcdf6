package memstore

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
)

// stepWall returns t with its wall reading moved by d, a whole number of
// seconds, and its monotonic reading kept: what time.Now gives once the
// system's wall clock has been stepped by d. ok is false where the time
// package lays a Time out otherwise than this expects (the caller skips).
func stepWall(t time.Time, d time.Duration) (time.Time, bool) {
	type layout struct {
		wall uint64 // with a monotonic reading: the flag, 33 bits of seconds, 30 of nanoseconds
		ext  int64  // the monotonic reading
		loc  *time.Location
	}
	const hasMonotonic = 1 << 63
	if unsafe.Sizeof(t) != unsafe.Sizeof(layout{}) || d%time.Second != 0 {
		return t, false
	}
	u := t
	l := (*layout)(unsafe.Pointer(&u))
	if l.wall&hasMonotonic == 0 {
		return t, false
	}
	l.wall += uint64(int64(d/time.Second)) << 30 // two's complement: a negative d steps back
	if u.Sub(t) != 0 || u.Unix()-t.Unix() != int64(d/time.Second) {
		return t, false
	}
	return u, true
}

// TestSweepAcrossWallClockSteps keeps a store's expiries on the clock that
// Before reads when the wall clock is stepped (an NTP step, a resumed VM)
// under a clock like time.Now: stepped forward, entries that are not due
// stay, and the sweep returns (ordered by Unix time, such an entry went
// back into the heap as due, and the sweep went round it for ever);
// stepped back, entries still expire when their time comes.
func TestSweepAcrossWallClockSteps(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clk := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	set := func(t time.Time) {
		mu.Lock()
		now = t
		mu.Unlock()
	}
	start := clk()
	forward, ok1 := stepWall(start.Add(time.Second), time.Hour)
	back, ok2 := stepWall(start.Add(2*time.Minute), -time.Hour)
	if !ok1 || !ok2 {
		t.Skip("the time package lays time.Time out otherwise than stepWall expects")
	}

	s := New(WithClock(clk), WithCleanupInterval(0))
	defer s.Close()
	ctx := context.Background()
	const n = 10
	for i := range n {
		k := idempotency.Key{Scope: "s", Key: strconv.Itoa(i)}
		r, err := s.Claim(ctx, k, "fp", time.Second, time.Minute)
		if err != nil || !r.Acquired {
			t.Fatalf("claim %d = %+v, %v", i, r, err)
		}
		if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: http.StatusCreated}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	set(forward) // the wall clock an hour on, the monotonic one a second
	done := make(chan struct{})
	go func() {
		s.sweep(clk())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweep has not returned 10s after the wall clock was stepped forward")
	}
	if got := s.count(); got != n {
		t.Fatalf("after a step forward the store holds %d entries; want all %d (not due on the monotonic clock)", got, n)
	}
	if e, ok, err := s.Get(ctx, idempotency.Key{Scope: "s", Key: "0"}); err != nil || !ok || e.State != idempotency.StateCompleted {
		t.Fatalf("Get after a step forward = %+v, %v, %v; want the completed entry", e, ok, err)
	}

	set(back) // the wall clock an hour back, the monotonic one two minutes on
	s.sweep(clk())
	if got := s.count(); got != 0 {
		t.Fatalf("after a step back and two minutes the store holds %d entries; want none (a minute's ttl)", got)
	}
}
