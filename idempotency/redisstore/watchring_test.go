package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestWatchOnARing: a *redis.Ring sends each script to the shard of its
// key, so a completion publishes on that shard, while the Store's
// subscription goes to the one shard its channel's name hashes to: the
// waiters of entries on the other shards are never woken (Redis does not
// pass messages between the servers of a Ring). The Store must either wake
// them or refuse to watch, so that the Middleware polls; it accepted the
// Watch and left them to the fallback poll. It refuses with ErrRingWatch.
func TestWatchOnARing(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{
		"a": startRedis(t, false, "--save", "", "--appendonly", "no"),
		"b": startRedis(t, false, "--save", "", "--appendonly", "no"),
	}})
	t.Cleanup(func() { ring.Close() })
	s := redisstore.New(ring, redisstore.WithPrefix("ring:"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 8 {
		k := idempotency.Key{Scope: "s", Key: "k" + strconv.Itoa(i)}
		c, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !c.Acquired {
			t.Fatalf("Claim(%q) = %+v, %v", k.Key, c, err)
		}
		settled, stop, err := s.Watch(ctx, k)
		if err != nil {
			if !errors.Is(err, redisstore.ErrRingWatch) {
				t.Errorf("Watch(%q) = %v, want ErrRingWatch", k.Key, err)
			}
			continue // refused: the Middleware polls
		}
		if err := s.Complete(ctx, k, c.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
			t.Fatalf("Complete(%q): %v", k.Key, err)
		}
		select {
		case <-settled:
		case <-time.After(time.Second):
			t.Errorf("Watch(%q) accepted, but its completion did not wake the waiter within 1s", k.Key)
		}
		stop()
	}
}
