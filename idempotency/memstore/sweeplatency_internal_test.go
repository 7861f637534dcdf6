package memstore

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestClaimDuringLargeSweep: Claims made while the sweep removes a large
// store's expired entries all succeed, the sweep removes every one of them
// and the counts end at zero. It logs how long the sweep took and how long
// the Claims waited (no timed assertion: the machine is shared). The store
// holds 100,000 entries, or MEMSTORE_SWEEP_ENTRIES.
func TestClaimDuringLargeSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a large store")
	}
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("MEMSTORE_SWEEP_ENTRIES")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	s, clk := newFake(t, WithMaxEntries(n+1000), WithMaxBytes(1<<40))
	for i := range n {
		k := idempotency.Key{Key: "old-" + strconv.Itoa(i)}
		r, err := s.Claim(ctx, k, "fp", time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("ok")}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	clk.Advance(time.Minute)

	done := make(chan time.Duration)
	var holds []time.Duration // how long each batch held its shard's lock, at most
	go func() {
		start := time.Now()
		now := clk.Now()
		for i := range s.shards {
			for more := true; more; {
				b := time.Now()
				_, _, more = s.shards[i].sweepExpired(now, sweepBatch)
				holds = append(holds, time.Since(b))
			}
		}
		done <- time.Since(start)
	}()
	var waits []time.Duration
	var sweepTook time.Duration
	for i := 0; ; i++ {
		k := idempotency.Key{Key: "new-" + strconv.Itoa(i)}
		start := time.Now()
		r, err := s.Claim(ctx, k, "fp", time.Second, time.Hour)
		waits = append(waits, time.Since(start))
		if err != nil || !r.Acquired {
			t.Fatalf("Claim during the sweep: %+v, %v", r, err)
		}
		if err := s.Release(ctx, k, r.Token); err != nil {
			t.Fatal(err)
		}
		select {
		case sweepTook = <-done:
		default:
			continue
		}
		break
	}
	slices.Sort(waits)
	slices.Sort(holds)
	t.Logf("%d batches of up to %d held a shard lock median %v, p99 %v, max %v",
		len(holds), sweepBatch, holds[len(holds)/2], holds[len(holds)*99/100], holds[len(holds)-1])
	t.Logf("sweep of %d expired entries took %v; %d Claims during it waited median %v, p99 %v, max %v",
		n, sweepTook, len(waits), waits[len(waits)/2], waits[len(waits)*99/100], waits[len(waits)-1])
	if got := s.count(); got != 0 {
		t.Errorf("%d entries left after the sweep, want 0", got)
	}
	clk.Advance(time.Hour)
	s.sweep(clk.Now())
	if e, b := s.usage(); e != 0 || b != 0 {
		t.Errorf("after the sweeps: %d entries and %d bytes in use, want 0 and 0", e, b)
	}
}
