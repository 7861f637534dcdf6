package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestWithWaitLongerThanReadTimeout: a WithWait timeout longer than the
// client's ReadTimeout (go-redis's default is 5 s, so WithWait(1, 10*time.Second)
// on a default client) must still end in ErrNotReplicated on a primary
// without replicas, with the claim given back, as WithWait documents. The
// WAIT rode in a pipeline read under the client's ReadTimeout: the read
// timed out first, Claim failed with an i/o timeout that was not
// ErrNotReplicated, and its claim, acquired on the primary, stayed in
// progress until its lease lapsed; the primary was never marked short of
// replicas either, so every later write timed out the same way.
func TestWithWaitLongerThanReadTimeout(t *testing.T) {
	addr := startRedis(t, false, "--save", "", "--appendonly", "no")
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	s := redisstore.New(rdb, redisstore.WithWait(1, 300*time.Millisecond))
	ctx := context.Background()
	k := idempotency.Key{Key: "k"}
	for i := range 2 {
		if _, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); !errors.Is(err, redisstore.ErrNotReplicated) {
			t.Fatalf("Claim %d = %v, want ErrNotReplicated", i+1, err)
		}
		if e, found, err := s.Get(ctx, k); found || err != nil {
			t.Fatalf("after Claim %d: Get = %+v, %v, %v; want the unreplicated claim given back", i+1, e, found, err)
		}
	}
}
