package redisstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestNewRefusesARing: a *redis.Ring takes a shard it finds down out of
// its hash (after three failed heartbeats) and sends that shard's keys to
// the others, so a key completed on it is claimed anew on another shard
// and its operation runs a second time (measured on two redis-servers
// behind proxies: a completed key, its shard refused and cut, a Claim a
// second later acquired it; once the shard was back, the first entry was
// read again). No Store over a Ring can keep the guarantee, so New refuses
// one, saying why, as it refuses a nil client; the Ring is not dialled.
func TestNewRefusesARing(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	t.Cleanup(func() { ring.Close() })
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		redisstore.New(ring)
	}()
	if msg := fmt.Sprint(recovered); recovered == nil || !strings.Contains(msg, "Ring") || !strings.Contains(msg, "twice") {
		t.Fatalf("New(*redis.Ring): recovered %v; want a panic that names the Ring and the second execution", recovered)
	}
}
