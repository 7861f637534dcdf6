package pgstore

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestCloseReturnsWhileDialsHang: Close, called while the renewal pool's
// connections are still being dialled to a database host that drops
// SYNs (a host gone, a full accept queue), returns within a bound. Cutting
// the pool's open connections does not end a dial that never connected,
// and pgxpool's Close waits for it (up to a minute).
func TestCloseReturnsWhileDialsHang(t *testing.T) {
	const bound = 3500 * time.Millisecond
	ctx := context.Background()
	admin := testenv.PostgresPool(t)
	table := testenv.PostgresTable(t, admin, "pgstore_test_")
	hang := testenv.FullQueueAddr(t)
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var gone atomic.Bool
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if gone.Load() {
			network, addr = "tcp", hang
		}
		return dial(ctx, network, addr)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool, WithTable(table))
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	k := idempotency.Key{Scope: "closedial", Key: "k"}
	res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !res.Acquired {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	gone.Store(true)
	// The first renewal makes the renewal pool, whose dials hang; the
	// renewal itself goes to the main pool.
	if err := s.Renew(ctx, k, res.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("Close returned after %v", time.Since(start).Round(10*time.Millisecond))
	case <-time.After(bound):
		t.Errorf("Close had not returned %v after it was called, the renewal pool's dials hanging", bound)
	}
}
