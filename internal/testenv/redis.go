package testenv

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisPrefix returns a key prefix of tb's own in the shared Redis,
// RandomName(name) followed by ":", and deletes every key under it at the
// end of tb, so that tests never see or touch other tests' data. Register
// it after rdb's Close, so that the deletion runs first.
func RedisPrefix(tb testing.TB, rdb redis.UniversalClient, name string) string {
	tb.Helper()
	prefix := RandomName(name) + ":"
	tb.Cleanup(func() {
		keys := RedisKeys(tb, rdb, prefix)
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

// RedisKeys lists the keys under prefix, which holds no glob characters. A
// failed scan is reported with tb.Errorf and ends the list early.
func RedisKeys(tb testing.TB, rdb redis.UniversalClient, prefix string) []string {
	tb.Helper()
	var keys []string
	iter := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Errorf("scan %q: %v", prefix, err)
	}
	return keys
}
