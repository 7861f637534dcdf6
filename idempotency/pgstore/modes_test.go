package pgstore_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/testenv"
)

// execModes are pgx's query exec modes, the default first.
var execModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

// unsafeBehindPgBouncer reports whether PgBouncer in transaction mode
// (1.18 here, no prepared statement tracking) breaks mode: the store must
// refuse it there.
func unsafeBehindPgBouncer(mode pgx.QueryExecMode) bool {
	return mode == pgx.QueryExecModeCacheStatement || mode == pgx.QueryExecModeDescribeExec
}

// TestExecModes runs the conformance suite of both modes, the
// multi-instance exactly-once scenario of both modes and the middleware
// tests in every pgx exec mode, on a direct connection and through
// PgBouncer in transaction pooling mode (SAFERETRY_PGBOUNCER_URL). Behind
// PgBouncer the modes it breaks must be refused with an *ExecModeError
// instead.
func TestExecModes(t *testing.T) {
	direct := pgURL(t)
	t.Run("direct", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(modeName(mode), func(t *testing.T) {
				runExecModeCell(t, pgTarget{url: direct, mode: mode})
			})
		}
	})
	t.Run("pgbouncer", func(t *testing.T) {
		bouncer := testenv.PgBouncerURL(t)
		for _, mode := range execModes {
			tg := pgTarget{url: bouncer, mode: mode, listenURL: direct}
			t.Run(modeName(mode), func(t *testing.T) {
				if unsafeBehindPgBouncer(mode) {
					testRefused(t, tg, pgTarget{url: direct})
					return
				}
				runExecModeCell(t, tg)
			})
		}
	})
}

func modeName(m pgx.QueryExecMode) string { return strings.ReplaceAll(m.String(), " ", "_") }

func runExecModeCell(t *testing.T, tg pgTarget) {
	t.Run("ConformanceLease", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) idempotency.Store { return tg.store(t, nil) }, storetest.Watching)
	})
	t.Run("ConformanceTx", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) idempotency.Store { return tg.txStore(t, nil) },
			storetest.Transactional, storetest.Watching)
	})
	t.Run("ExactlyOnceLease", func(t *testing.T) { scenario.ExactlyOnce(t, tg.store(t, nil)) })
	t.Run("ExactlyOnceTx", func(t *testing.T) {
		scenario.ExactlyOnce(t, tg.txStore(t, tg.newPool(t, func(c *pgxpool.Config) { c.MaxConns = 16 })))
	})
	t.Run("KeyReusedLease", func(t *testing.T) { scenario.KeyReused(t, tg.store(t, nil)) })
	t.Run("KeyReusedTx", func(t *testing.T) {
		scenario.KeyReused(t, tg.txStore(t, tg.newPool(t, func(c *pgxpool.Config) { c.MaxConns = 16 })))
	})
	runMiddlewareTests(t, tg)
}

// testRefused checks that a store over tg, whose exec mode the pooler
// breaks, refuses to work: CreateSchema, Claim, Get, BeginTx and
// DeleteExpired return an *ExecModeError naming the mode, and nothing
// reached the table (direct, a direct target, looks).
func testRefused(t *testing.T, tg, direct pgTarget) {
	ctx := ctxT(t)
	pool := tg.newPool(t)
	table := uniqueTable(t, direct.newPool(t))
	s := pgstore.NewTx(pool, pgstore.WithTable(table))
	check := func(op string, err error) {
		t.Helper()
		var em *pgstore.ExecModeError
		if !errors.Is(err, pgstore.ErrUnsafeExecMode) || !errors.As(err, &em) || em.Mode != tg.mode || em.AnnouncedPID == em.ServerPID {
			t.Errorf("%s in mode %v through PgBouncer: err = %v, want an *ExecModeError for the mode", op, tg.mode, err)
		}
	}
	check("CreateSchema", s.CreateSchema(ctx))
	_, err := s.Claim(ctx, key("a"), "fp", time.Second, time.Minute)
	check("Claim", err)
	_, _, err = s.Get(ctx, key("a"))
	check("Get", err)
	_, err = s.BeginTx(ctx)
	check("BeginTx", err)
	_, err = s.DeleteExpired(ctx, 10)
	check("DeleteExpired", err)
	var exists bool
	if err := direct.newPool(t).QueryRow(ctx, `SELECT to_regclass($1::text) IS NOT NULL`, table).Scan(&exists); err != nil || exists {
		t.Errorf("table %s exists = %v (%v); want CreateSchema to have done nothing", table, exists, err)
	}
	// The same pool is not refused once the pooler is declared session
	// mode: the refusal comes from the detection, not from the mode alone.
	// Whether CreateSchema then works is luck, since the declaration is
	// false: its statements are prepared on whichever server connection
	// PgBouncer hands out, which may keep one of the same name from another
	// client or an earlier run (42P05, already exists).
	if err := pgstore.New(pool, pgstore.WithTable(table), pgstore.WithPooler(pgstore.PoolerSession)).CreateSchema(ctx); errors.Is(err, pgstore.ErrUnsafeExecMode) {
		t.Errorf("CreateSchema with PoolerSession: %v; want no refusal", err)
	}
}

// TestDirectModesNotRefused: on a direct connection, the modes that a
// transaction pooler breaks are not refused (no false detection).
func TestDirectModesNotRefused(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec} {
		t.Run(modeName(mode), func(t *testing.T) {
			s := newTxStore(t, pgTarget{url: pgURL(t), mode: mode}.newPool(t))
			if _, err := s.Claim(ctxT(t), key("a"), "fp", time.Second, time.Minute); err != nil {
				t.Fatalf("Claim: %v", err)
			}
		})
	}
}

// TestListenNotThroughPgBouncer: a Store whose pool goes through PgBouncer
// in transaction mode, given no WithListenConfig, does not LISTEN through
// it (PgBouncer would hand the listening server connection to other
// clients and drop the notifications): it logs ErrListenBehindPooler, and
// its waiters are not woken by notifications but still see the outcome.
func TestListenNotThroughPgBouncer(t *testing.T) {
	logs := &errorLog{}
	tg := pgTarget{url: testenv.PgBouncerURL(t), mode: pgx.QueryExecModeExec}
	s := newStore(t, tg.newPool(t), pgstore.WithLogger(slog.New(logs)))
	ctx := ctxT(t)
	k := key("w")
	res, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Minute)
	if err != nil || !res.Acquired {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	_, stop, err := s.Watch(ctx, k)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stop()
	testenv.Eventually(t, "the store logs that it does not listen through the pooler", func() bool {
		return logs.has(pgstore.ErrListenBehindPooler)
	})
}

// errorLog is a slog.Handler that keeps the errors logged.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *errorLog) WithGroup(string) slog.Handler            { return l }

func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			l.mu.Lock()
			l.errs = append(l.errs, err)
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *errorLog) has(target error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, err := range l.errs {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
