package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/examples/internal/exampletest"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestMain checks the test Redis once before any test runs, and says how many
// tests skipped without it; see testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Redis) }

func TestRunReportsBadAddressFirst(t *testing.T) {
	// Nothing listens on port 1: were the address not checked first, the
	// error would be about Redis.
	err := run(context.Background(), "256.0.0.1:1", "redis://127.0.0.1:1/0", "x:", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-addr") {
		t.Fatalf("run with a bad address = %v, want an -addr error", err)
	}
}

func TestRunServesReplaysAndShutsDown(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testenv.RedisPrefix(t, rdb, "saferetry-example-test:")

	base, shutdown := exampletest.Start(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, "127.0.0.1:0", redisURL, prefix, out)
	})

	post := func(key string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(`{"item":"book","quantity":2}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	r1, b1 := post("order-1")
	r2, b2 := post("order-1")
	if r1.StatusCode != 201 || r2.StatusCode != 201 || r2.Header.Get("Idempotent-Replayed") != "true" || b1 != b2 {
		t.Fatalf("first %d %q, retry %d replayed=%q %q; want one 201 replayed", r1.StatusCode, b1, r2.StatusCode, r2.Header.Get("Idempotent-Replayed"), b2)
	}
	resp, err := http.Get(base + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	var orders []json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&orders)
	resp.Body.Close()
	if err != nil || len(orders) != 1 {
		t.Errorf("GET /orders = %d orders (%v), want 1", len(orders), err)
	}

	shutdown("/orders")
}
