package testenv

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisPrefix returns a key prefix of tb's own in the shared Redis,
// RandomName(name) followed by ":", and deletes every key under it at the
// end of tb, so that tests never see or touch other tests' data. Register
// it after rdb's Close, so that the deletion runs first. rdb may be a
// *redis.ClusterClient: the keys are then looked for on every primary.
func RedisPrefix(tb testing.TB, rdb redis.UniversalClient, name string) string {
	tb.Helper()
	prefix := RandomName(name) + ":"
	tb.Cleanup(func() {
		keys := RedisKeys(tb, rdb, prefix)
		if _, ok := rdb.(*redis.ClusterClient); ok {
			// Keys of several slots cannot go in one command; a
			// cluster pipeline sends each to its own node.
			pipe := rdb.Pipeline()
			for _, k := range keys {
				pipe.Unlink(context.Background(), k)
			}
			if _, err := pipe.Exec(context.Background()); err != nil && len(keys) > 0 {
				tb.Errorf("cleanup under %q: %v", prefix, err)
			}
			return
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := rdb.Unlink(context.Background(), keys[:n]...).Err(); err != nil {
				tb.Errorf("cleanup under %q: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
	return prefix
}

// RedisKeys lists the keys under prefix, which holds no glob characters,
// from every primary when rdb is a *redis.ClusterClient. A failed scan is
// reported with tb.Errorf and ends the list early.
func RedisKeys(tb testing.TB, rdb redis.UniversalClient, prefix string) []string {
	tb.Helper()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		keys, err := scanKeys(rdb, prefix)
		if err != nil {
			tb.Errorf("scan %q: %v", prefix, err)
		}
		return keys
	}
	var mu sync.Mutex
	var keys []string
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		got, err := scanKeys(node, prefix)
		mu.Lock()
		keys = append(keys, got...)
		mu.Unlock()
		return err
	})
	if err != nil {
		tb.Errorf("scan %q: %v", prefix, err)
	}
	return keys
}

func scanKeys(rdb redis.Cmdable, prefix string) ([]string, error) {
	var keys []string
	iter := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

// RedisClient returns a client of SAFERETRY_REDIS_URL (skipping tb as
// RedisURL does), closed when tb ends. It does not connect: Main checked
// the service once already.
func RedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(RedisURL(tb))
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", EnvRedisURL, err)
	}
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
