package pgstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/scenario"
)

// faultLease is the lease of the fault scenarios: short, so that each runs
// in a few seconds, and long enough for the latencies they inject.
const faultLease = 600 * time.Millisecond

// slowLease is the lease of the slow-store scenario.
const slowLease = time.Second

// storeAt returns a scenario.StoreAt for lease-mode stores sharing one
// fresh table, and the address of the test database.
func storeAt(t *testing.T) (scenario.StoreAt, string) {
	cfg, err := pgxpool.ParseConfig(pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	table := newStore(t, nil).Table()
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	return func(t *testing.T, addr string, poolSize int) idempotency.Store {
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
	}, target
}

func TestSlowStoreKeepsTheLease(t *testing.T) {
	for _, div := range []time.Duration{10, 5} {
		t.Run("latency lease/"+strconv.Itoa(int(div)), func(t *testing.T) {
			at, target := storeAt(t)
			// A longer lease gives a loaded machine more slack in absolute
			// terms; the latency is the same fraction of it.
			scenario.SlowStore(t, at, target, slowLease, slowLease/div)
		})
	}
}

func TestStoreSlowerThanTheLease(t *testing.T) {
	at, target := storeAt(t)
	scenario.StoreSlowerThanLease(t, at, target, faultLease/2, faultLease*3/4)
}

func TestPausedHolderWritesNothing(t *testing.T) {
	at, target := storeAt(t)
	scenario.PausedHolder(t, at, target, faultLease/2)
}

func TestCutDuringComplete(t *testing.T) {
	at, target := storeAt(t)
	scenario.CutDuringComplete(t, at, target, faultLease*2)
}

func TestThousandWaitersKeepTheHoldersLease(t *testing.T) {
	at, target := storeAt(t)
	scenario.ManyWaiters(t, at, target, faultLease)
}
