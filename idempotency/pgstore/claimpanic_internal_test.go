package pgstore

import (
	"context"
	"errors"
	"slices"
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
	newStore, settled := newPanicStore, settledAfterPanic

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

// TestClaimPanicAfterTheStatementFreesTheKey: a pgx tracer that panics
// in TraceQueryEnd of the claim statement, whose answer, the claim and
// its token, came back before (pgx scans the row, then closes it, which
// calls the tracer), raises its panic on the caller of Claim, and the
// claim that the statement made is released. The token was lost with the
// panic, and the key stayed held, every retry answered 409, for the whole
// lease: on the caller's goroutine (a context that never ends), on the
// Store's (one that can), and there once the caller had left.
func TestClaimPanicAfterTheStatementFreesTheKey(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, pool, tracer := newPanicStore(t)
			ctx, cancel := tt.ctx()
			defer cancel()
			k := idempotency.Key{Scope: "claimpanic", Key: "end-" + tt.name}
			tracer.panicAtEnd(s, tracePanicAtEnd)
			p := func() (p any) {
				defer func() { p = recover() }()
				res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
				t.Errorf("Claim whose tracer panics = %+v, %v; want the panic", res, err)
				return nil
			}()
			if err, _ := p.(error); !errors.Is(err, errTracerBug) {
				t.Fatalf("Claim panicked with %v; want the tracer's %v", p, errTracerBug)
			}
			settledAfterPanic(t, s, pool, tracer, k)
		})
	}

	t.Run("caller left", func(t *testing.T) {
		s, pool, tracer := newPanicStore(t)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		k := idempotency.Key{Scope: "claimpanic", Key: "end-left"}
		tracer.panicAtEnd(s, tracePanicAtEndReleased)
		if res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Claim whose context ended while its tracer waited = %+v, %v; want the context's error", res, err)
		}
		close(tracer.released) // the tracer panics now, the caller gone
		settledAfterPanic(t, s, pool, tracer, k)
	})
}

// newPanicStore returns a Store on a pool of its own, whose connections
// trace their queries with the panickingTracer it returns too.
func newPanicStore(t *testing.T) (*Store, *pgxpool.Pool, *panickingTracer) {
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

// settledAfterPanic waits until the Claim whose tracer panicked has given
// its connection back and left the gate, and checks that k is free.
func settledAfterPanic(t *testing.T, s *Store, pool *pgxpool.Pool, tracer *panickingTracer, k idempotency.Key) {
	t.Helper()
	testenv.Eventually(t, "the claim's goroutine leaves the gate and gives its connection back", func() bool {
		return s.gate.InUse() == 0 && pool.Stat().AcquiredConns() == 0
	})
	tracer.mode.Store(traceNothing)
	if r, err := s.Claim(context.Background(), k, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
		t.Errorf("Claim after the panic = %+v, %v; want the key acquired", r, err)
	}
}

var errTracerBug = errors.New("tracer bug")

const (
	traceNothing       = iota
	tracePanic         // TraceQueryStart panics with errTracerBug
	tracePanicReleased // TraceQueryStart panics once released is closed
	// TraceQueryEnd of a claim statement (the upsert or the claim
	// statement) panics, its answer in hand.
	tracePanicAtEnd
	tracePanicAtEndReleased // as tracePanicAtEnd, once released is closed
)

// panickingTracer is a pgx tracer with a bug: set to, it panics.
type panickingTracer struct {
	mode     atomic.Int32
	released chan struct{}
	claimSQL []string // the statements that tracePanicAtEnd panics after
}

// panicAtEnd sets p to mode, tracePanicAtEnd or tracePanicAtEndReleased,
// for the claim statements of s.
func (p *panickingTracer) panicAtEnd(s *Store, mode int32) {
	p.claimSQL = []string{s.sql.claim, s.sql.upsert}
	p.mode.Store(mode)
}

// tracedSQL is the context key under which TraceQueryStart hands the
// statement to TraceQueryEnd.
type tracedSQL struct{}

func (p *panickingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	switch p.mode.Load() {
	case tracePanicReleased:
		<-p.released
		panic(errTracerBug)
	case tracePanic:
		panic(errTracerBug)
	}
	return context.WithValue(ctx, tracedSQL{}, data.SQL)
}

func (p *panickingTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	mode := p.mode.Load()
	if mode != tracePanicAtEnd && mode != tracePanicAtEndReleased {
		return
	}
	sql, _ := ctx.Value(tracedSQL{}).(string)
	if !slices.Contains(p.claimSQL, sql) || data.Err != nil {
		return
	}
	if mode == tracePanicAtEndReleased {
		<-p.released
	}
	panic(errTracerBug)
}
