package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestClaimHonoursTheCallersDeadline: a Claim whose statement waits (here
// for a row lock another transaction holds, as a database that stalls
// would make it) returns when its caller's context ends, as the Store
// contract has it, not when the statement answers at last or the lease
// (10 s) runs out; and what the statement then acquired for the caller
// that left is released, so that a retry gets the key at once.
func TestClaimHonoursTheCallersDeadline(t *testing.T) {
	const (
		lease    = 10 * time.Second
		deadline = 300 * time.Millisecond
		bound    = 2 * time.Second // within which Claim must return
	)
	pool := testenv.PostgresPoolAt(t, testenv.PostgresURL(t))
	s := New(pool, WithTable(testenv.PostgresTable(t, pool, "pgstore_claimdeadline_")))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), deadline)
		}},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(deadline, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := idempotency.Key{Scope: "claimdeadline", Key: testenv.RandomName("lapsed")}
			if r, err := s.Claim(context.Background(), k, "fp", 50*time.Millisecond, time.Hour); err != nil || !r.Acquired {
				t.Fatalf("Claim = %+v, %v", r, err)
			}
			time.Sleep(100 * time.Millisecond) // the lease lapses: a claim takes it over, locking its row
			unlock := lockRows(t, s, k)
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			res, err := s.Claim(ctx, k, "fp", lease, time.Hour)
			took := time.Since(start)
			if err == nil {
				t.Fatalf("Claim whose context ended while its row was locked = %+v, nil; want the context's error", res)
			}
			if took > bound {
				t.Fatalf("Claim returned %v after it was called, its context ended after %v: want at most %v (err %v)",
					took.Round(time.Millisecond), deadline, bound, err)
			}
			if !errors.Is(err, ctx.Err()) {
				t.Errorf("Claim = %v; want the context's error %v", err, ctx.Err())
			}
			unlock()
			testenv.Eventually(t, "a retry acquires the key", func() bool {
				r, err := s.Claim(context.Background(), k, "fp", lease, time.Hour)
				return err == nil && r.Acquired
			})
			testenv.Eventually(t, "the claim that outlived its caller leaves the gate", func() bool {
				return s.gate.InUse() == 0
			})
		})
	}
}

// TestClaimWithALeaseShorterThanItsRoundTrip: a Claim whose lease is
// shorter than the statement's round trip (a millisecond over a database
// 20 ms away) gets the statement's answer, as any lease of a microsecond
// or more may (the caller then judges what is left of it), rather than
// the statement cut at the lease's end and an error.
func TestClaimWithALeaseShorterThanItsRoundTrip(t *testing.T) {
	pool, proxy := testenv.ProxiedPostgresPool(t)
	s := New(pool, WithTable(testenv.PostgresTable(t, pool, "pgstore_claimshort_")))
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(20 * time.Millisecond)
	cctx, cancel := context.WithCancel(ctx) // a request's context: it has a Done channel
	defer cancel()
	k := idempotency.Key{Scope: "claimshort", Key: testenv.RandomName("k")}
	if r, err := s.Claim(cctx, k, "fp", time.Millisecond, time.Hour); err != nil || !r.Acquired {
		t.Fatalf("Claim with a lease of 1ms = %+v, %v; want it acquired", r, err)
	}
}
