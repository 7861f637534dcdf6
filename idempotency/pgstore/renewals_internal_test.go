package pgstore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestRenewalPoolGrows checks that once the renewal pool has a connection
// open, renewals stay on it when its kept connections are all busy (it
// opens more) rather than falling back to the main pool, where they would
// queue behind requests.
func TestRenewalPoolGrows(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	main, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close()
	s := &Store{pool: main, cfg: config{renewalConns: 2}}
	defer s.Close()

	ctx := context.Background()
	testenv.Eventually(t, "the renewal pool opens its connections", func() bool {
		p := s.renewalPool()
		return p != main && p.Stat().IdleConns() >= 2
	})
	rp := s.renewalPool()
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range 2 {
		c, err := rp.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for i := range 5 {
		p := s.renewalPool()
		if p == main {
			t.Fatalf("renewal %d went to the main pool while the renewal pool's %d kept connections were busy", i, len(held))
		}
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	if n := rp.Stat().TotalConns(); n != 7 {
		t.Fatalf("renewal pool has %d connections, want 7 (it grew for the busy renewals)", n)
	}
}
