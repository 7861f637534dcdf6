package redisstore

import (
	"strings"
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

// clusterHashed returns the part of name that Redis Cluster hashes to pick a
// slot: the content of the first {...} when it is not empty, else the whole
// name (the rule of the Redis Cluster specification).
func clusterHashed(name string) string {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return name
	}
	end := strings.IndexByte(name[open+1:], '}')
	if end <= 0 {
		return name
	}
	return name[open+1 : open+1+end]
}

// TestClientBracesAreNoHashTag: a scope or key holding {...} must not act as
// a Redis Cluster hash tag, or a client could pile every entry whose key
// carries "{x}" into one slot, across all tenants.
func TestClientBracesAreNoHashTag(t *testing.T) {
	s := &Store{cfg: config{prefix: DefaultPrefix}}
	for _, k := range []idempotency.Key{
		{Scope: "tenant", Key: "{hot}"},
		{Scope: "{hot}", Key: "k"},
		{Scope: "", Key: "a{b}c"},
		{Scope: "t", Key: "}{x}"},
		{Scope: "t", Key: "plain"},
	} {
		if name := s.redisKey(k); clusterHashed(name) != name {
			t.Errorf("redisKey(%q) = %q hashes as %q, want the whole name", k, name, clusterHashed(name))
		}
	}
}
