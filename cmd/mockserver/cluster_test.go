package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestRunRefusesRedisClusterNode: -store takes a standalone Redis. Given a
// node of a Redis Cluster it used to start and then answer most requests
// 503 with a bare "MOVED 11250 127.0.0.1:7002" (each key that hashes to
// another node); it must refuse at start, with an error that says why.
func TestRunRefusesRedisClusterNode(t *testing.T) {
	addr := testenv.RedisClusterAddrs(t)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"-addr", "127.0.0.1:0", "-store-wait", "0", "-store", "redis://" + addr + "/0"}, &stdout, &stderr)
	if ctx.Err() != nil {
		t.Fatalf("run served a Redis Cluster node until the deadline (stdout %q), want a refusal at start", stdout.String())
	}
	if err == nil || !strings.Contains(err.Error(), "cluster") {
		t.Fatalf("run with a Redis Cluster node = %v, want an error that names the cluster", err)
	}
}
