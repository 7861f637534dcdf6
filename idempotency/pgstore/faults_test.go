package pgstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
)

// TestStoreFaults runs the store fault scenarios (latency, a paused
// holder, a cut during Complete, a thousand waiters) through a proxy in
// front of the test database, with lease-mode stores sharing one table.
func TestStoreFaults(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	table := newStore(t, nil).Table()
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	scenario.StoreFaults(t, func(t *testing.T, addr string, poolSize int) idempotency.Store {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		c := cfg.Copy()
		c.ConnConfig.Host, c.ConnConfig.Port = host, uint16(p)
		c.MaxConns, c.MinConns = int32(poolSize), int32(poolSize)
		pool, err := pgxpool.NewWithConfig(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s := pgstore.New(pool, pgstore.WithTable(table))
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, target)
}

// TestWatchAcrossInstances: NOTIFY wakes a waiter on another instance,
// with a pool of its own.
func TestWatchAcrossInstances(t *testing.T) {
	holder := newStore(t, nil)
	waiter := pgstore.New(newPool(t), pgstore.WithTable(holder.Table()))
	t.Cleanup(func() { _ = waiter.Close() })
	scenario.WatchAcrossInstances(t, holder, waiter)
}
