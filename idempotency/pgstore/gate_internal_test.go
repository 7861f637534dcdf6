package pgstore

import (
	"context"
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
		in, st := p.store.gate.Load()
		p.seen = append(p.seen, gateLoad{d.SQL, in, st})
	}
	return ctx
}

func (p *gateProbe) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (p *gateProbe) take() []gateLoad {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := p.seen
	p.seen = nil
	return seen
}

// TestGateSeesEveryCall checks that each call on the main pool tells the
// Store's gate what it is: Claim, Get and Watch enter it as request-path
// calls, and Complete, Release and a renewal on the main pool announce
// themselves as settling calls, so that request-path calls yield the
// pool to them.
func TestGateSeesEveryCall(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	probe := &gateProbe{}
	cfg.MaxConns = 4
	cfg.ConnConfig.Tracer = probe
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the table is dropped
	ctx := context.Background()
	table := testenv.PostgresTable(t, pool, "pgstore_gate_")
	s := New(pool, WithTable(table), WithRenewalConns(0))
	defer s.Close()
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.gate.Limit(); got != 4 {
		t.Fatalf("gate limit on a pool of 4 = %d, want 4", got)
	}
	probe.mu.Lock()
	probe.store = s
	probe.mu.Unlock()

	k := idempotency.Key{Scope: "gate", Key: testenv.RandomName("k")}
	check := func(what string, settling bool) {
		t.Helper()
		seen := probe.take()
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
	if in, st := s.gate.Load(); in != 0 || st != 0 {
		t.Fatalf("after the calls the gate holds %d inside and %d settling, want 0 and 0", in, st)
	}
}
