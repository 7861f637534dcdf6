package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestSettlePanicGivesTheConnectionBack: a pgx tracer that panics in
// Complete or Release, before the statement is sent (TraceQueryStart) or
// after its answer came back (TraceQueryEnd), raises its panic on the
// caller, and the connection that the statement ran on goes back to the
// pool. A connection kept acquired by a panic is never given back: the
// pool shrinks by one for good with every such panic, until every
// request waits for a connection, and the pool's Close waits forever.
func TestSettlePanicGivesTheConnectionBack(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mode   int32
		settle func(s *Store, k idempotency.Key, token int64) error
	}{
		{"complete at start", tracePanic, completeSettle},
		{"complete at end", tracePanicAtEnd, completeSettle},
		{"release at start", tracePanic, releaseSettle},
		{"release at end", tracePanicAtEnd, releaseSettle},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, pool, tracer := newSettlePanicStore(t)
			k := idempotency.Key{Scope: "settlepanic", Key: tt.name}
			r, err := s.Claim(context.Background(), k, "fp", time.Minute, time.Hour)
			if err != nil || !r.Acquired {
				t.Fatalf("Claim = %+v, %v", r, err)
			}
			tracer.claimSQL = []string{s.sql.complete, s.sql.release} // what tracePanicAtEnd panics after
			tracer.mode.Store(tt.mode)
			p := func() (p any) {
				defer func() { p = recover() }()
				err := tt.settle(s, k, r.Token)
				t.Errorf("settle whose tracer panics = %v; want the panic", err)
				return nil
			}()
			tracer.mode.Store(traceNothing)
			if err, _ := p.(error); !errors.Is(err, errTracerBug) {
				t.Fatalf("settle panicked with %v; want the tracer's %v", p, errTracerBug)
			}
			if n := pool.Stat().AcquiredConns(); n != 0 {
				t.Errorf("after the panic, %d connections of the pool are acquired; want 0", n)
			}
		})
	}
}

func completeSettle(s *Store, k idempotency.Key, token int64) error {
	return s.Complete(context.Background(), k, token, idempotency.Response{Status: 201}, time.Hour)
}

func releaseSettle(s *Store, k idempotency.Key, token int64) error {
	return s.Release(context.Background(), k, token)
}

// newSettlePanicStore is newPanicStore on a pool that is closed at the
// end only when no connection of it is acquired: a connection that a
// panic kept acquired is never given back, and the pool's Close would
// wait for it forever.
func newSettlePanicStore(t *testing.T) (*Store, *pgxpool.Pool, *panickingTracer) {
	tracer := &panickingTracer{released: make(chan struct{})}
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Logf("the pool is left open: %d of its connections were never given back", n)
			return
		}
		pool.Close()
	})
	s := New(pool, WithTable(testenv.PostgresTable(t, pool, "pgstore_settlepanic_")))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, pool, tracer
}
