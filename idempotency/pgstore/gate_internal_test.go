package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// gateProbe records the Store gate's load as each statement starts.
type gateProbe struct {
	mu    sync.Mutex
	store *Store
	seen  []gateLoad
}

type gateLoad struct {
	sql              string
	inside, settling int
}

func (p *gateProbe) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store != nil {
		in, st, _ := p.store.gate.Load()
		p.seen = append(p.seen, gateLoad{d.SQL, in, st})
	}
	return ctx
}

func (p *gateProbe) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// acquiring marks a context whose pool Acquire the probe reports on the
// channel.
type acquiring struct{}

func (p *gateProbe) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	if ch, ok := ctx.Value(acquiring{}).(chan struct{}); ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return ctx
}

func (p *gateProbe) TraceAcquireEnd(context.Context, *pgxpool.Pool, pgxpool.TraceAcquireEndData) {}

func (p *gateProbe) take() []gateLoad {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := p.seen
	p.seen = nil
	return seen
}

// gatePool returns a pool of n connections traced by probe, and a Store
// on a fresh table of it with opts; both are closed at cleanup.
func gatePool(t *testing.T, n int32, probe *gateProbe, opts ...Option) (*pgxpool.Pool, *Store) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = n
	cfg.ConnConfig.Tracer = probe
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the table is dropped
	s := New(pool, append([]Option{WithTable(testenv.PostgresTable(t, pool, "pgstore_gate_"))}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool, s
}

// TestGateSeesEveryCall checks that each call on the main pool tells the
// Store's gate what it is: Claim, Get and Watch enter it as request-path
// calls, and Complete, Release and a renewal on the main pool announce
// themselves as settling calls, which the gate lends no connection to.
func TestGateSeesEveryCall(t *testing.T) {
	probe := &gateProbe{}
	_, s := gatePool(t, 4, probe, WithRenewalConns(0))
	ctx := context.Background()
	probe.mu.Lock()
	probe.store = s
	probe.mu.Unlock()

	k := idempotency.Key{Scope: "gate", Key: testenv.RandomName("k")}
	check := func(what string, settling bool) {
		t.Helper()
		seen := probe.take()
		if what == "Watch" {
			// The LISTEN connection's statements are not the pool's.
			seen = seen[:min(len(seen), 1)]
		}
		if len(seen) == 0 {
			t.Fatalf("%s sent no statement on the main pool", what)
		}
		for _, l := range seen {
			if settling && (l.settling != 1 || l.inside != 0) || !settling && (l.inside != 1 || l.settling != 0) {
				t.Errorf("%s: a statement started with %d request-path calls inside and %d settling, want %s\n%s",
					what, l.inside, l.settling, map[bool]string{true: "0 and 1", false: "1 and 0"}[settling], l.sql)
			}
		}
	}
	r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	check("Claim", false)
	if err := s.Renew(ctx, k, r.Token, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	check("Renew on the main pool", true)
	if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatal(err)
	}
	check("Complete", true)
	if _, found, err := s.Get(ctx, k); err != nil || !found {
		t.Fatalf("Get = %v, %v", found, err)
	}
	check("Get", false)
	_, stop, err := s.Watch(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	check("Watch", false)
	k2 := idempotency.Key{Scope: "gate", Key: testenv.RandomName("k")}
	r, err = s.Claim(ctx, k2, "fp", 10*time.Second, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	probe.take()
	if err := s.Release(ctx, k2, r.Token); err != nil {
		t.Fatal(err)
	}
	check("Release", true)
	if in, st, _ := s.gate.Load(); in != 0 || st != 0 {
		t.Fatalf("after the calls the gate holds %d inside and %d settling, want 0 and 0", in, st)
	}
	if tx := NewTx(s.pool); tx.gate.Limit() != 3 || tx.gate == s.gate {
		t.Fatalf("a TxStore's gate on a pool of 4 lets %d through without lending, want 3", tx.gate.Limit())
	}
}

// lockRows opens a transaction on a pool of its own that locks the rows of
// keys in s's table, and returns the function that ends it (also called
// at cleanup).
func lockRows(t *testing.T, s *Store, keys ...idempotency.Key) func() {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM `+s.names.table+` WHERE scope = $1 AND key = $2 FOR UPDATE`, k.Scope, k.Key).Scan(&one)
		if err != nil {
			t.Fatalf("lock %v: %v", k, err)
		}
	}
	var once sync.Once
	unlock := func() { once.Do(func() { _ = tx.Rollback(ctx); _ = conn.Close(ctx) }) }
	t.Cleanup(unlock)
	return unlock
}

// lapsedClaims claims n new keys in s with a lease of a millisecond and
// returns them once their leases have lapsed: a claim of one then takes
// it over, which locks its row (and waits for a lock on it).
func lapsedClaims(t *testing.T, s *Store, n int) []idempotency.Key {
	t.Helper()
	keys := make([]idempotency.Key, n)
	for i := range keys {
		keys[i] = idempotency.Key{Scope: "gate", Key: testenv.RandomName("lapsed")}
		if r, err := s.Claim(context.Background(), keys[i], "fp", time.Millisecond, time.Hour); err != nil || !r.Acquired {
			t.Fatalf("Claim = %+v, %v", r, err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the leases' millisecond, on the database's clock
	return keys
}

// takeOver claims k, a lapsed claim, in the background; the error, or
// nil once it acquired, comes on the channel.
func takeOver(s *Store, k idempotency.Key) <-chan error {
	ch := make(chan error, 1)
	go func() {
		r, err := s.Claim(context.Background(), k, "fp", 10*time.Second, time.Hour)
		if err == nil && !r.Acquired {
			err = fmt.Errorf("the takeover of %v answered %+v", k, r)
		}
		ch <- err
	}()
	return ch
}

// TestRequestPathUsesTheWholePool checks that claims may hold every
// connection of the Store's pool while nothing else needs one: the gate
// lends the quarter it keeps.
func TestRequestPathUsesTheWholePool(t *testing.T) {
	pool, s := gatePool(t, 2, &gateProbe{})
	keys := lapsedClaims(t, s, 2)
	unlock := lockRows(t, s, keys...)
	first, second := takeOver(s, keys[0]), takeOver(s, keys[1])
	testenv.Eventually(t, "both takeovers hold a connection of the pool of 2", func() bool {
		return pool.Stat().AcquiredConns() == 2
	})
	unlock()
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompletionNotQueuedBehindLentClaims checks that the gate lends no
// connection nobody gave up: with one connection of a pool of 2 held by
// what else uses the pool (a handler's query) and the other by a claim
// waiting for a row lock, a second claim stays at the gate rather than
// queue in the pool, so that a completion that comes after it gets the
// connection the first claim gives back. (Had the second claim queued in
// the pool, it would take that connection and wait for its own locked row,
// and the completion with it.)
func TestCompletionNotQueuedBehindLentClaims(t *testing.T) {
	probe := &gateProbe{}
	pool, s := gatePool(t, 2, probe)
	ctx := context.Background()
	done := idempotency.Key{Scope: "gate", Key: testenv.RandomName("done")}
	claimed, err := s.Claim(ctx, done, "fp", time.Minute, time.Hour)
	if err != nil || !claimed.Acquired {
		t.Fatalf("Claim = %+v, %v", claimed, err)
	}
	keys := lapsedClaims(t, s, 2)
	unlockFirst := lockRows(t, s, keys[0])
	unlockSecond := lockRows(t, s, keys[1])
	handler, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer handler.Release()
	first := takeOver(s, keys[0])
	testenv.Eventually(t, "the first claim holds the other connection", func() bool {
		return pool.Stat().AcquiredConns() == 2
	})
	second := takeOver(s, keys[1])
	testenv.Eventually(t, "the second claim waits", func() bool {
		in, _, waiting := s.gate.Load()
		return in+waiting == 2
	})
	acquire := make(chan struct{}, 1)
	completed := make(chan error, 1)
	go func() {
		completed <- s.Complete(context.WithValue(ctx, acquiring{}, acquire), done, claimed.Token, idempotency.Response{Status: 201}, time.Hour)
	}()
	<-acquire
	time.Sleep(20 * time.Millisecond) // from the tracer's call into the pool's queue
	unlockFirst()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-completed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("Complete still waits for a connection: the claim that came before it took the one given back")
	}
	unlockSecond()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}
