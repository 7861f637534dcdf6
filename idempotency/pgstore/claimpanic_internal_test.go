package pgstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestClaimPanicComesBackToTheCaller: a panic in the code that a Claim's
// statements run (here a pgx tracer's, ConnConfig.Tracer) on the
// goroutine that a Claim with a context that can end runs them on is
// raised again on the caller's goroutine, carrying the panic's value
// (errors.Is matches it) and the stack where it happened; and when the
// caller had left already (its context ended), it is dropped. Either way
// the connection goes back to the pool and the place in the gate is
// left, and the key is free. The panic ended the process: no recover ran
// on that goroutine, where no caller's recover (net/http's, a
// middleware's) could reach it.
func TestClaimPanicComesBackToTheCaller(t *testing.T) {
	newStore := func(t *testing.T) (*Store, *pgxpool.Pool, *panickingTracer) {
		tracer := &panickingTracer{released: make(chan struct{})}
		pool := testenv.PostgresPoolAt(t, testenv.PostgresURL(t), func(c *pgxpool.Config) { c.ConnConfig.Tracer = tracer })
		s := New(pool, WithTable(testenv.PostgresTable(t, pool, "pgstore_claimpanic_")))
		t.Cleanup(func() { _ = s.Close() })
		if err := s.CreateSchema(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The store's one-time checks run before the tracer panics.
		if r, err := s.Claim(context.Background(), idempotency.Key{Scope: "claimpanic", Key: "warm"}, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
			t.Fatalf("Claim = %+v, %v", r, err)
		}
		return s, pool, tracer
	}
	settled := func(t *testing.T, s *Store, pool *pgxpool.Pool, tracer *panickingTracer, k idempotency.Key) {
		t.Helper()
		testenv.Eventually(t, "the claim's goroutine leaves the gate and gives its connection back", func() bool {
			return s.gate.InUse() == 0 && pool.Stat().AcquiredConns() == 0
		})
		tracer.mode.Store(traceNothing)
		if r, err := s.Claim(context.Background(), k, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
			t.Errorf("Claim after the panic = %+v, %v; want the key acquired", r, err)
		}
	}

	t.Run("caller waits", func(t *testing.T) {
		s, pool, tracer := newStore(t)
		ctx, cancel := context.WithCancel(context.Background()) // a request's: it can end
		defer cancel()
		k := idempotency.Key{Scope: "claimpanic", Key: "waits"}
		tracer.mode.Store(tracePanic)
		p := func() (p any) {
			defer func() { p = recover() }()
			res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
			t.Errorf("Claim whose tracer panics = %+v, %v; want the panic", res, err)
			return nil
		}()
		err, _ := p.(error)
		if !errors.Is(err, errTracerBug) {
			t.Errorf("Claim panicked with %v; want a value that errors.Is matches with the tracer's %v", p, errTracerBug)
		} else if !strings.Contains(err.Error(), "TraceQueryStart") {
			t.Errorf("Claim panicked with %q; want the stack where the tracer panicked in it", err)
		}
		settled(t, s, pool, tracer, k)
	})

	t.Run("caller left", func(t *testing.T) {
		s, pool, tracer := newStore(t)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		k := idempotency.Key{Scope: "claimpanic", Key: "left"}
		tracer.mode.Store(tracePanicReleased)
		if res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Claim whose context ended while its tracer waited = %+v, %v; want the context's error", res, err)
		}
		close(tracer.released) // the tracer panics now, the caller gone
		settled(t, s, pool, tracer, k)
	})
}

var errTracerBug = errors.New("tracer bug")

const (
	traceNothing       = iota
	tracePanic         // TraceQueryStart panics with errTracerBug
	tracePanicReleased // TraceQueryStart panics once released is closed
)

// panickingTracer is a pgx tracer with a bug: set to, it panics.
type panickingTracer struct {
	mode     atomic.Int32
	released chan struct{}
}

func (p *panickingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	switch p.mode.Load() {
	case tracePanicReleased:
		<-p.released
		panic(errTracerBug)
	case tracePanic:
		panic(errTracerBug)
	}
	return ctx
}

func (p *panickingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
