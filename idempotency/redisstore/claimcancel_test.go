package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestClaimWhoseContextEndsInFlightFreesTheKey: a Claim whose context
// ends while its script is on its way to Redis (a Redis 500 ms away, a
// request deadline or cancellation of 100 ms) returns with the context's
// error, and the claim that the script then makes for the caller that
// left is released, so that a retry acquires the key at once. On a client
// that reads under the context's deadline (ContextTimeoutEnabled) the
// claim was made after Claim had failed with the read's timeout, its
// token lost with the answer, and the key stayed held, every retry
// answered "in progress", for the whole lease (20 s); such a client's
// Claim returns when its context ends, also for a cancellation, which
// go-redis does not let cut a read short. On a client that reads under
// its ReadTimeout alone (the default), the context cuts no read: Claim
// returns with the answer, as go-redis does, and a cancellation was not
// honoured at all (the claim returned as acquired).
func TestClaimWhoseContextEndsInFlightFreesTheKey(t *testing.T) {
	const (
		lease   = 20 * time.Second // how long the key stayed held
		latency = 500 * time.Millisecond
		ends    = 100 * time.Millisecond // the caller's context ends then
		bound   = 3 * time.Second        // within which a retry must acquire
	)
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), ends)
	}
	cancelled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(ends, cancel)
		return ctx, cancel
	}
	for _, tt := range []struct {
		name           string
		contextTimeout bool // the client's ContextTimeoutEnabled, under which Claim returns when ctx ends
		ctx            func() (context.Context, context.CancelFunc)
	}{
		{"deadline", true, deadline},
		{"cancelled", true, cancelled},
		{"cancelled/ReadTimeout alone", false, cancelled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			direct, rdb, prefix := newStore(t)
			opt := *rdb.Options()
			proxy := testenv.StartProxy(t, opt.Addr)
			opt.Addr, opt.ContextTimeoutEnabled = proxy.Addr(), tt.contextTimeout
			far := redis.NewClient(&opt)
			t.Cleanup(func() { far.Close() })
			s := redisstore.New(far, redisstore.WithPrefix(prefix))
			ctx := context.Background()
			// A first claim opens the connection and loads the script, so
			// that the claim below sends its EVALSHA at once.
			mustClaim(t, s, idempotency.Key{Key: "warm"}, "fp", lease, time.Hour)

			proxy.SetLatency(latency)
			k := idempotency.Key{Key: "k"}
			cctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			res, err := s.Claim(cctx, k, "fp", lease, time.Hour)
			took := time.Since(start)
			proxy.SetLatency(0) // for the answer, and the retries below
			if err == nil {
				t.Fatalf("Claim whose context ended %v after it was called, before its answer = %+v, nil; want the context's error", ends, res)
			}
			if !errors.Is(err, cctx.Err()) {
				t.Errorf("Claim = %v; want the context's error %v", err, cctx.Err())
			}
			if tt.contextTimeout && took >= latency {
				t.Errorf("Claim returned %v after it was called, its context ended after %v: want it to return then, not wait for the answer",
					took.Round(time.Millisecond), ends)
			}

			// The script reaches Redis and runs: the entry exists from then
			// on, held, or released (a released entry keeps its token until
			// it expires).
			testenv.Eventually(t, "the claim script has run", func() bool {
				n, err := rdb.Exists(ctx, entryName(prefix, k.Key)).Result()
				return err == nil && n == 1
			})
			start = time.Now()
			for {
				r, err := direct.Claim(ctx, k, "fp", lease, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if r.Acquired {
					t.Logf("a retry acquired the key %v after the cancelled Claim returned", time.Since(start).Round(time.Millisecond))
					return
				}
				if time.Since(start) > bound {
					t.Fatalf("a retry still finds the key %v %v after the cancelled Claim returned (lease %v, left %v); want it free",
						r.Entry.State, bound, lease, r.Entry.LeaseRemaining.Round(time.Second))
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
