package redisstore

import (
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// FuzzRedisKey checks that the Redis key names (scope, key) pairs one to one:
// two pairs share a hash only when they are equal.
func FuzzRedisKey(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c")
	f.Add("", "1:a:b", "1:a", "b")
	f.Add("10", ":x", "1", "0::x")
	f.Add("same", "k", "same", "k")
	s := &Store{cfg: config{prefix: DefaultPrefix}}
	f.Fuzz(func(t *testing.T, scope1, key1, scope2, key2 string) {
		a := idempotency.Key{Scope: scope1, Key: key1}
		b := idempotency.Key{Scope: scope2, Key: key2}
		if (s.redisKey(a) == s.redisKey(b)) != (a == b) {
			t.Errorf("redisKey(%q) = %q, redisKey(%q) = %q", a, s.redisKey(a), b, s.redisKey(b))
		}
	})
}
