package memstore

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestHeldFingerprintKeepsNoResponse: the Fingerprint of an Entry the store
// returned (a refused Claim's, Get's) may share its entry's allocation (see
// newEntry), and a caller may hold it as long as it likes: once the entry
// is gone from the store (swept, or dropped when its key is touched after
// it expired), holding it must not keep the entry's stored response, which
// may be as large as the byte bound, alive.
func TestHeldFingerprintKeepsNoResponse(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove func(s *Store, k idempotency.Key, now time.Time)
	}{
		{"swept", func(s *Store, _ idempotency.Key, now time.Time) { s.sweep(now) }},
		{"dropped when touched", func(s *Store, k idempotency.Key, _ time.Time) {
			if _, found, err := s.Get(context.Background(), k); found || err != nil {
				t.Fatalf("Get after expiry: found %v, %v", found, err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var now atomic.Pointer[time.Time]
			start := time.Unix(1_700_000_000, 0)
			now.Store(&start)
			s := New(WithClock(func() time.Time { return *now.Load() }), WithCleanupInterval(0))
			defer s.Close()
			k := idempotency.Key{Key: "held-fingerprint"}
			held, freed := replayedFingerprint(t, s, k)
			later := start.Add(2 * time.Minute) // past the ttl
			now.Store(&later)
			c.remove(s, k, later)
			if s.budget.entries.Load() != 0 {
				t.Fatalf("the entry is still in the store")
			}
			for range 100 {
				runtime.GC()
				select {
				case <-freed:
					runtime.KeepAlive(held)
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			t.Errorf("the stored response of a removed entry is still alive while its fingerprint (%d bytes) is held", len(held))
			runtime.KeepAlive(held)
		})
	}
}

// replayedFingerprint completes k in s with a 1 MiB response, replays it,
// and returns the replay's Entry.Fingerprint alone, and a channel closed
// when the stored response is collected.
func replayedFingerprint(t *testing.T, s *Store, k idempotency.Key) (string, chan struct{}) {
	t.Helper()
	ctx := context.Background()
	fp := "v1:" + strings.Repeat("0123456789abcdef", 4) // as long as the Middleware's
	r, err := s.Claim(ctx, k, fp, time.Minute, time.Minute)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim: %+v, %v", r, err)
	}
	if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: make([]byte, 1<<20)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	replay, err := s.Claim(ctx, k, fp, time.Minute, time.Minute)
	if err != nil || replay.Acquired || replay.Entry.Fingerprint != fp || replay.Entry.Response == nil {
		t.Fatalf("replay: %+v, %v", replay, err)
	}
	sh := s.shardFor(k)
	sh.mu.Lock()
	resp := sh.m[k].resp
	sh.mu.Unlock()
	freed := make(chan struct{})
	runtime.AddCleanup(resp, func(c chan struct{}) { close(c) }, freed)
	return replay.Entry.Fingerprint, freed
}
