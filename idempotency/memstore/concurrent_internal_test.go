package memstore

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestConcurrentAtBoundsExactlyOnce: goroutines claim, complete (some
// responses too large for the room left, then the not-replayable marker),
// release and replay the same few keys and many different ones in a
// bounded store, with watchers waiting and sweeps running, while no lease lapses and no ttl ends. Every key is held
// by one claim at a time, a completed key is never acquired again, every
// watcher of a settled key wakes, and the counts are exact at the end and
// return to zero once everything expired.
func TestConcurrentAtBoundsExactlyOnce(t *testing.T) {
	ctx := context.Background()
	const maxEntries, maxBytes = 1000, 64 << 10 // the bytes bind first
	s, clk := newFake(t, WithMaxEntries(maxEntries), WithMaxBytes(maxBytes))

	type keyState struct {
		held      atomic.Int32
		completed atomic.Bool
	}
	var (
		states  sync.Map // idempotency.Key -> *keyState
		wg      sync.WaitGroup
		doubles atomic.Int64
		fulls   atomic.Int64
		notKept atomic.Int64
	)
	stateOf := func(k idempotency.Key) *keyState {
		v, _ := states.LoadOrStore(k, new(keyState))
		return v.(*keyState)
	}
	sweeping := make(chan struct{})
	go func() { // sweeps that find nothing due but take the shard locks
		defer close(sweeping)
		for i := 0; i < 2000; i++ {
			s.sweep(clk.Now())
		}
	}()
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 600 {
				var k idempotency.Key
				if i%3 == 0 {
					k = idempotency.Key{Scope: "same", Key: strconv.Itoa(i % 5)}
				} else {
					k = idempotency.Key{Scope: strconv.Itoa(g), Key: strconv.Itoa(i)}
				}
				st := stateOf(k)
				var ch <-chan struct{}
				var stop func()
				if i%4 == 0 {
					ch, stop, _ = s.Watch(ctx, k)
				}
				r, err := s.Claim(ctx, k, "fp", time.Hour, 2*time.Hour)
				if errors.Is(err, ErrFull) {
					fulls.Add(1)
					if stop != nil {
						stop()
					}
					continue
				}
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if !r.Acquired {
					if stop != nil {
						stop()
					}
					continue
				}
				if !st.held.CompareAndSwap(0, 1) || st.completed.Load() {
					doubles.Add(1)
				}
				switch i % 3 {
				case 0, 1:
					body := bytes.Repeat([]byte("x"), (g*37+i*11)%4000)
					err = s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: body}, time.Hour)
					if errors.Is(err, idempotency.ErrResponseNotStorable) {
						notKept.Add(1)
						err = s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Oversize: true}, time.Hour)
					}
					if err != nil {
						t.Errorf("Complete: %v", err)
					}
					st.completed.Store(true)
					st.held.Store(0)
				default:
					st.held.Store(0)
					if err := s.Release(ctx, k, r.Token); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
				if ch != nil {
					// The watcher was made before the claim: its key was
					// settled since, by this goroutine.
					select {
					case <-ch:
					case <-time.After(10 * time.Second):
						t.Errorf("watcher of %v not woken after its key settled", k)
					}
					stop()
				}
			}
		}()
	}
	wg.Wait()
	<-sweeping
	if n := doubles.Load(); n != 0 {
		t.Errorf("%d claims acquired a key that was held or completed: a second execution", n)
	}
	t.Logf("ErrFull %d, responses not kept %d", fulls.Load(), notKept.Load())
	if fulls.Load() == 0 {
		t.Error("the test did not reach the bound")
	}
	checkBudget(t, s)
	if e, b := s.usage(); e > maxEntries || b > maxBytes {
		t.Errorf("usage %d entries, %d bytes past the bounds", e, b)
	}
	clk.Advance(2 * time.Hour)
	s.sweep(clk.Now())
	if e, b := s.usage(); e != 0 || b != 0 {
		t.Errorf("after everything expired: %d entries and %d bytes in use, want 0 and 0", e, b)
	}
	checkBudget(t, s)
}

// TestCloseWhileWorking: Close returns while claims and sweeps run on real
// time, and the store keeps working after it.
func TestCloseWhileWorking(t *testing.T) {
	ctx := context.Background()
	s := New(WithCleanupInterval(time.Microsecond), WithMaxEntries(50))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := idempotency.Key{Scope: strconv.Itoa(g), Key: strconv.Itoa(i % 40)}
				r, err := s.Claim(ctx, k, "fp", time.Millisecond, time.Millisecond)
				if err != nil && !errors.Is(err, ErrFull) {
					t.Errorf("Claim: %v", err)
					return
				}
				if r.Acquired && i%2 == 0 {
					_ = s.Release(ctx, k, r.Token)
				}
			}
		}()
	}
	for range 3 {
		go s.Close()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	checkBudget(t, s)
}
