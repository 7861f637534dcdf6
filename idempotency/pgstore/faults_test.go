package pgstore_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/testenv"
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
		return storeAt(t, cfg, table, addr, poolSize)
	}, target)
}

// storeAt returns a lease-mode store on table whose pool of poolSize
// connections reaches the database of cfg at addr (a proxy's), both closed
// at cleanup; mutate, if any, changes the pool's configuration.
func storeAt(t *testing.T, cfg *pgxpool.Config, table, addr string, poolSize int, mutate ...func(*pgxpool.Config)) *pgstore.Store {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	c := cfg.Copy()
	c.ConnConfig.Host, c.ConnConfig.Port = host, uint16(p)
	c.MaxConns, c.MinConns = int32(poolSize), int32(poolSize)
	for _, m := range mutate {
		m(c)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := pgstore.New(pool, pgstore.WithTable(table))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestTakeoverUnderLatencyUpsertFirst takes over a claim whose holder died
// (its lease lapsed) through a store that begins its claims with the
// upsert, with a one-way latency of a seventh of the lease between that
// store and the database. The takeover must take one round trip, as with
// the claim statement (its answer then comes back with 5/7 of the lease
// left): after two (3/7 left), the Middleware would refuse to start the
// handler on a claim with less than half its lease left (409), and the
// key would never be executed while the store stays that slow. The first
// request runs the handler and answers 201.
func TestTakeoverUnderLatencyUpsertFirst(t *testing.T) {
	const lease = time.Second
	cfg, err := pgxpool.ParseConfig(pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	dead := newStore(t, nil)
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	proxy := testenv.StartProxy(t, target)
	// One connection, on which the upsert is prepared before the latency
	// starts (pgx prepares a statement at its first use on a connection,
	// in a round trip of its own), and not pinged: pgxpool pings a
	// connection idle for a second before handing it out, a round trip of
	// its own too. Neither depends on what the claim sends.
	s := storeAt(t, cfg, dead.Table(), proxy.Addr(), 1, func(c *pgxpool.Config) {
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	upsertFirst(t, s)
	if res, err := s.Claim(ctxT(t), key("prepares-the-upsert"), "fp", time.Minute, time.Hour); err != nil || !res.Acquired {
		t.Fatalf("claim of a new key: %+v %v", res, err)
	}

	body := `{"amount":1}`
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body)).WithContext(ctxT(t))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idempotency.HeaderIdempotencyKey, "died-holding-it")
	fp := idempotency.Fingerprint(r, []byte(body))
	// The holder that died: a claim of the same request, with a lease that
	// lapses at once, never completed.
	if res, err := dead.Claim(ctxT(t), idempotency.Key{Key: "died-holding-it"}, fp, time.Millisecond, time.Hour); err != nil || !res.Acquired {
		t.Fatalf("the dead holder's claim: %+v %v", res, err)
	}
	time.Sleep(5 * time.Millisecond)

	proxy.SetLatency(lease / 7)
	runs := 0
	h := idempotency.Middleware(s, idempotency.WithLease(lease))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated || runs != 1 {
		t.Fatalf("the retry after the holder died answered %d %s with %d runs; want 201 after one run", w.Code, w.Body, runs)
	}
	if !pgstore.UpsertsFirst(s) {
		t.Error("the store stopped beginning with the upsert")
	}
}

// TestWatchAcrossInstances: NOTIFY wakes a waiter on another instance,
// with a pool of its own.
func TestWatchAcrossInstances(t *testing.T) {
	holder := newStore(t, nil)
	waiter := pgstore.New(newPool(t), pgstore.WithTable(holder.Table()))
	t.Cleanup(func() { _ = waiter.Close() })
	scenario.WatchAcrossInstances(t, holder, waiter)
}
