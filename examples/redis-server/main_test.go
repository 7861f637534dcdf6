package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

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
	prefix := testenv.RedisPrefix(t, testenv.RedisClient(t), "saferetry-example-test:")

	base, shutdown := exampletest.Start(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, "127.0.0.1:0", redisURL, prefix, out)
	})

	const order = `{"item":"book","quantity":2}`
	r1 := exampletest.Post(t, base+"/orders", "order-1", order)
	r2 := exampletest.Post(t, base+"/orders", "order-1", order)
	if r1.Status != 201 || r2.Status != 201 || !r2.Replayed || r1.Body != r2.Body {
		t.Fatalf("first %d %q, retry %d replayed=%v %q; want one 201 replayed", r1.Status, r1.Body, r2.Status, r2.Replayed, r2.Body)
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
