package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

func TestClaimCompleteReplay(t *testing.T) {
	s := newStore(t, nil)
	ctx := ctxT(t)
	k := key("replay")
	r, err := s.Claim(ctx, k, "v1:fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired || r.TookOver || r.Token <= 0 {
		t.Fatalf("first Claim = %+v, %v; want acquired with a positive token", r, err)
	}
	again, err := s.Claim(ctx, k, "v1:fp", time.Minute, time.Hour)
	if err != nil || again.Acquired {
		t.Fatalf("second Claim = %+v, %v; want blocked", again, err)
	}
	if e := again.Entry; e.State != idempotency.StateInProgress || e.Token != r.Token || e.Fingerprint != "v1:fp" ||
		e.LeaseRemaining <= 50*time.Second || e.LeaseRemaining > time.Minute {
		t.Fatalf("blocking entry = %+v; want in progress, token %d, lease about 1m", e, r.Token)
	}
	resp := idempotency.Response{
		Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}},
		Body:   []byte(`{"id":1}` + "\x00\xff"),
	}
	if err := s.Complete(ctx, k, r.Token, resp, time.Hour); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rep, err := s.Claim(ctx, k, "v1:fp", time.Minute, time.Hour)
	if err != nil || rep.Acquired {
		t.Fatalf("Claim after Complete = %+v, %v; want the completed entry", rep, err)
	}
	e := rep.Entry
	if e.State != idempotency.StateCompleted || e.Token != r.Token || e.LeaseRemaining != 0 || e.Response == nil {
		t.Fatalf("entry = %+v; want completed with a response", e)
	}
	if e.Response.Status != 201 || !bytes.Equal(e.Response.Body, resp.Body) ||
		fmt.Sprint(e.Response.Header) != fmt.Sprint(resp.Header) || e.Response.Oversize {
		t.Fatalf("stored response = %+v; want %+v", *e.Response, resp)
	}
	got, found, err := s.Get(ctx, k)
	if err != nil || !found || got.State != idempotency.StateCompleted || got.Token != r.Token {
		t.Fatalf("Get = %+v, %v, %v", got, found, err)
	}
	if err := s.Complete(ctx, k, r.Token, resp, time.Hour); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("second Complete = %v; want ErrStaleToken", err)
	}
}

func TestOversizeAndEmptyResponse(t *testing.T) {
	s := newStore(t, nil)
	ctx := ctxT(t)
	for i, resp := range []idempotency.Response{
		{Status: 200, Oversize: true},
		{Status: 204},
		{Status: 200, Body: []byte{}},
	} {
		k := key(fmt.Sprint("resp", i))
		r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim: %+v %v", r, err)
		}
		if err := s.Complete(ctx, k, r.Token, resp, time.Hour); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e, found, err := s.Get(ctx, k)
		if err != nil || !found || e.Response == nil {
			t.Fatalf("Get = %+v %v %v", e, found, err)
		}
		if e.Response.Status != resp.Status || e.Response.Oversize != resp.Oversize ||
			len(e.Response.Body) != 0 || len(e.Response.Header) != 0 {
			t.Errorf("case %d: stored %+v, want %+v", i, *e.Response, resp)
		}
	}
}

func TestTakeoverOnlyWithSameFingerprintAfterLapse(t *testing.T) {
	s := newStore(t, nil)
	ctx := ctxT(t)
	k := key("takeover")
	first, err := s.Claim(ctx, k, "fp-a", 40*time.Millisecond, time.Hour)
	if err != nil || !first.Acquired {
		t.Fatalf("Claim: %+v %v", first, err)
	}
	testenv.Eventually(t, "the lease lapses", func() bool {
		e, _, err := s.Get(ctx, k)
		return err == nil && e.LeaseRemaining <= 0
	})
	other, err := s.Claim(ctx, k, "fp-b", time.Minute, time.Hour)
	if err != nil || other.Acquired || other.Entry.Fingerprint != "fp-a" || other.Entry.Token != first.Token {
		t.Fatalf("Claim with another fingerprint = %+v, %v; want the blocking fp-a entry", other, err)
	}
	took, err := s.Claim(ctx, k, "fp-a", time.Minute, time.Hour)
	if err != nil || !took.Acquired || !took.TookOver || took.Token <= first.Token {
		t.Fatalf("takeover = %+v, %v; want acquired, TookOver, token > %d", took, err, first.Token)
	}
	for name, err := range map[string]error{
		"Renew":    s.Renew(ctx, k, first.Token, time.Minute),
		"Complete": s.Complete(ctx, k, first.Token, idempotency.Response{Status: 200}, time.Hour),
		"Release":  s.Release(ctx, k, first.Token),
	} {
		if !errors.Is(err, idempotency.ErrStaleToken) {
			t.Errorf("%s with the superseded token = %v; want ErrStaleToken", name, err)
		}
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.State != idempotency.StateInProgress || e.Token != took.Token || e.LeaseRemaining <= 0 {
		t.Fatalf("Get after stale writes = %+v %v %v; want the new holder's live claim", e, found, err)
	}
}

func TestReleaseDeletesAndTokensGrow(t *testing.T) {
	s := newStore(t, nil)
	ctx := ctxT(t)
	k := key("release")
	var last int64
	for i := range 3 {
		r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !r.Acquired || r.TookOver || r.Token <= last {
			t.Fatalf("Claim %d = %+v, %v; want acquired with token > %d", i, r, err, last)
		}
		last = r.Token
		if err := s.Release(ctx, k, r.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if _, found, err := s.Get(ctx, k); err != nil || found {
			t.Fatalf("Get after Release: found=%v err=%v", found, err)
		}
	}
}

func TestExpiredEntryIsAbsentAndOverwritten(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	table := s.Table()
	ctx := ctxT(t)
	k := key("expiry")
	// The claim's ttl is long, so that Complete cannot come too late on a
	// loaded machine; Complete's own short ttl is the one that expires.
	r, err := s.Claim(ctx, k, "fp-a", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim: %+v %v", r, err)
	}
	if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 200}, 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the entry expires", func() bool {
		_, found, err := s.Get(ctx, k)
		return err == nil && !found
	})
	// The row is still there (no reaper ran) but counts as absent: any
	// fingerprint claims it anew, and a stale token cannot touch it.
	if n := count(t, pool, table); n != 1 {
		t.Fatalf("rows = %d, want the expired row still present", n)
	}
	if err := s.Renew(ctx, k, r.Token, time.Minute); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("Renew of an expired entry = %v; want ErrStaleToken", err)
	}
	again, err := s.Claim(ctx, k, "fp-b", time.Minute, time.Hour)
	if err != nil || !again.Acquired || again.TookOver || again.Token <= r.Token {
		t.Fatalf("Claim over the expired row = %+v, %v", again, err)
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.State != idempotency.StateInProgress || e.Fingerprint != "fp-b" || e.Response != nil {
		t.Fatalf("Get = %+v %v %v; want a fresh in-progress fp-b entry", e, found, err)
	}
}

func TestRenewKeepsRowAliveForLease(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	ctx := ctxT(t)
	k := key("renew")
	// A ttl of a few seconds leaves a loaded machine time to Renew before
	// it; the row's own expiry, read on the database clock, shows whether
	// Renew pushed it, without waiting for the ttl to pass.
	r, err := s.Claim(ctx, k, "fp", 40*time.Millisecond, 5*time.Second)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	if err := s.Renew(ctx, k, r.Token, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.LeaseRemaining < 50*time.Second {
		t.Fatalf("Get = %+v %v %v", e, found, err)
	}
	// Had the ttl stayed 5s, the held claim would expire under its holder.
	var left float64 // seconds
	err = pool.QueryRow(ctx, `SELECT extract(epoch FROM expires_at - statement_timestamp())::float8 FROM "`+s.Table()+`"
		WHERE scope = $1 AND key = $2`, k.Scope, k.Key).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left < 50 {
		t.Fatalf("row expires in %.3fs after Renew(1m), want at least the lease", left)
	}
}

func TestConcurrentClaimsOneWinnerAcrossPools(t *testing.T) {
	pool := newPool(t)
	table := uniqueTable(t, pool)
	ctx := ctxT(t)
	// Several pools stand for several application instances.
	stores := []*pgstore.Store{
		pgstore.New(pool, pgstore.WithTable(table)),
		pgstore.New(newPool(t), pgstore.WithTable(table)),
		pgstore.New(newPool(t), pgstore.WithTable(table)),
	}
	if err := stores[0].CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		k := key(fmt.Sprint("race", round))
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			won []int64
		)
		start := make(chan struct{})
		for i := range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := stores[i%len(stores)].Claim(ctx, k, "fp", time.Minute, time.Hour)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if r.Acquired {
					mu.Lock()
					won = append(won, r.Token)
					mu.Unlock()
				} else if r.Entry.State != idempotency.StateInProgress {
					t.Errorf("blocked by %+v, want in progress", r.Entry)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(won), won)
		}
	}
}

func TestDeleteExpiredInBatches(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	table := s.Table()
	ctx := ctxT(t)
	for i := range 25 {
		if _, err := s.Claim(ctx, key(fmt.Sprint("old", i)), "fp", time.Minute, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := s.Claim(ctx, key(fmt.Sprint("live", i)), "fp", time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the short entries expire", func() bool {
		_, found, err := s.Get(ctx, key("old24"))
		return err == nil && !found
	})
	var got []int64
	for {
		n, err := s.DeleteExpired(ctx, 10)
		if err != nil {
			t.Fatalf("DeleteExpired: %v", err)
		}
		got = append(got, n)
		if n < 10 {
			break
		}
	}
	if fmt.Sprint(got) != "[10 10 5]" {
		t.Fatalf("batches deleted %v, want [10 10 5]", got)
	}
	if n := count(t, pool, table); n != 5 {
		t.Fatalf("rows left = %d, want the 5 live ones", n)
	}
	if _, err := s.DeleteExpired(ctx, 0); err == nil {
		t.Fatal("DeleteExpired(0) did not fail")
	}
}

// TestStatementsUseIndexes runs every statement on a table large enough for
// the planner to prefer indexes, and checks PostgreSQL's own scan counters:
// no statement scans the table sequentially, cleanup included.
func TestStatementsUseIndexes(t *testing.T) {
	// One connection, so that pg_stat_force_next_flush acts on the session
	// that ran the statements.
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s := newStore(t, pool)
	table := s.Table()
	ctx := ctxT(t)
	_, err := pool.Exec(ctx, `INSERT INTO "`+table+`" (scope, key, state, fingerprint, lease_until, expires_at)
		SELECT 's', 'k' || g, 2, 'fp', NULL, now() + g * interval '1 second' - interval '100 seconds'
		FROM generate_series(1, 20000) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE "`+table+`"`); err != nil {
		t.Fatal(err)
	}
	scans := func() (seq, idx int64) {
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		// The flush happens when the session goes idle; read until it shows.
		var prev int64 = -1
		testenv.Eventually(t, "scan counters settle", func() bool {
			err := pool.QueryRow(ctx, `SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&seq, &idx)
			if err != nil {
				t.Fatal(err)
			}
			settled := idx == prev
			prev = idx
			return settled
		})
		return seq, idx
	}
	seq0, idx0 := scans()
	n, err := s.DeleteExpired(ctx, 100)
	if err != nil || n != 100 {
		t.Fatalf("DeleteExpired = %d, %v; want 100", n, err)
	}
	k := idempotency.Key{Scope: "s", Key: "new"}
	r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	if _, err := s.Claim(ctx, idempotency.Key{Scope: "s", Key: "k19000"}, "fp", time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, k, r.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, k, r.Token); err != nil {
		t.Fatal(err)
	}
	seq1, idx1 := scans()
	if seq1 != seq0 {
		t.Errorf("sequential scans grew from %d to %d: a statement scans the whole table", seq0, seq1)
	}
	if idx1 <= idx0 {
		t.Errorf("index scans %d -> %d: the statements did not use the indexes", idx0, idx1)
	}
}

func TestCreateSchemaRepeatedAndConcurrent(t *testing.T) {
	pool := newPool(t)
	table := uniqueTable(t, pool)
	s := pgstore.New(pool, pgstore.WithTable(table))
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.CreateSchema(ctx); err != nil {
				t.Errorf("concurrent CreateSchema: %v", err)
			}
		}()
	}
	wg.Wait()
	r, err := s.Claim(ctx, key("schema"), "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	if _, found, err := s.Get(ctx, key("schema")); err != nil || !found {
		t.Fatalf("CreateSchema again lost data: found=%v err=%v", found, err)
	}
}

func TestSchemaAndTableNames(t *testing.T) {
	for ok, names := range map[bool][]string{
		true:  {"idempotency_entries", "_x1", "app.entries", strings.Repeat("a", 48)},
		false: {strings.Repeat("a", 49), "", "Entries", "1abc", "a.b.c", "a;drop table x", `a"b`, "app."},
	} {
		for _, name := range names {
			err := pgstore.ValidateTable(name)
			if (err == nil) != ok {
				t.Errorf("ValidateTable(%q) = %v, want ok=%v", name, err, ok)
			}
			if err != nil && !errors.Is(err, pgstore.ErrInvalidTable) {
				t.Errorf("ValidateTable(%q) = %v, not ErrInvalidTable", name, err)
			}
			sql, err := pgstore.Schema(name)
			if (err == nil) != ok || (ok && !strings.Contains(sql, "CREATE TABLE IF NOT EXISTS")) {
				t.Errorf("Schema(%q) = %q, %v", name, sql, err)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("New with an invalid table did not panic")
		}
	}()
	pgstore.New(nil, pgstore.WithTable("bad name"))
}

func TestSchemaQualifiedTable(t *testing.T) {
	pool := newPool(t)
	ctx := ctxT(t)
	schema := uniqueTable(t, pool) + "_s"
	if _, err := pool.Exec(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(ctxT(t), `DROP SCHEMA "`+schema+`" CASCADE`) })
	s := pgstore.New(pool, pgstore.WithTable(schema+".entries"))
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := s.Claim(ctx, key("q"), "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
}

func TestReaperDeletesAndStops(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool, pgstore.WithReapBatch(3))
	table := s.Table()
	ctx := ctxT(t)
	for i := range 10 {
		if _, err := s.Claim(ctx, key(fmt.Sprint("r", i)), "fp", time.Minute, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Claim(ctx, key("keep"), "fp", time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	stop := s.StartReaper(ctx, 10*time.Millisecond)
	testenv.Eventually(t, "the reaper deletes the expired rows", func() bool { return count(t, pool, table) == 1 })
	stop()
	stop() // a second stop is harmless
	// After stop, nothing is deleted any more.
	if _, err := s.Claim(ctx, key("late"), "fp", time.Minute, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := count(t, pool, table); n != 2 {
		t.Fatalf("rows = %d after stop, want 2: the reaper still runs", n)
	}

	// Cancelling the parent context also ends the reaper; stop then returns.
	cctx, cancel := contextWithCancel(ctx)
	stop2 := s.StartReaper(cctx, 10*time.Millisecond)
	cancel()
	done := make(chan struct{})
	go func() { stop2(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not return after the context was cancelled")
	}
}

func TestReaperLogsFailures(t *testing.T) {
	pool := newPool(t)
	var buf testkit.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	// The table does not exist: every cleanup fails and is logged.
	s := pgstore.New(pool, pgstore.WithTable(uniqueTable(t, pool)), pgstore.WithLogger(logger))
	stop := s.StartReaper(ctxT(t), 5*time.Millisecond)
	defer stop()
	testenv.Eventually(t, "the reaper logs its failure", func() bool {
		return strings.Contains(buf.String(), "pgstore: reaper failed") && strings.Contains(buf.String(), "42P01")
	})
}

func TestNilOptionIgnored(t *testing.T) {
	// New does not touch the database, so an unreachable pool will do.
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if s := pgstore.New(pool, nil, pgstore.WithTable("nil_option"), nil); s.Table() != "nil_option" {
		t.Errorf("Table() = %q, want nil_option", s.Table())
	}
	if s := pgstore.NewTx(pool, nil); s.Table() != pgstore.DefaultTable {
		t.Errorf("Table() = %q, want %q", s.Table(), pgstore.DefaultTable)
	}
}

func TestNewNilPoolPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "pgstore: New called with a nil pool") {
			t.Errorf("New(nil) panicked with %v, want a pgstore message", r)
		}
	}()
	pgstore.New(nil)
}

// TestNonPositiveTTLRefused: a ttl of zero (or below a microsecond) would
// make a row that is expired at birth: two Claims would both acquire it, and
// a Complete would lose the outcome at once, so the retry runs again. The
// other stores refuse such a ttl; so must this one, in both modes.
func TestNonPositiveTTLRefused(t *testing.T) {
	pool := newPool(t)
	s := newTxStore(t, pool)
	ctx := ctxT(t)
	for _, ttl := range []time.Duration{0, -time.Second, time.Nanosecond} {
		k := key(fmt.Sprint("ttl", int64(ttl)))
		first, err1 := s.Claim(ctx, k, "fp", time.Minute, ttl)
		second, err2 := s.Claim(ctx, k, "fp", time.Minute, ttl)
		switch {
		case ttl > 0:
			// Rounded up to a microsecond: allowed (the row then expires
			// before the second Claim, which may acquire it anew).
			if err1 != nil || !first.Acquired {
				t.Errorf("ttl %v: Claim = %+v, %v; want acquired", ttl, first, err1)
			}
		case err1 == nil || err2 == nil || errors.Is(err1, idempotency.ErrStaleToken):
			t.Errorf("ttl %v: Claims = (%+v, %v), (%+v, %v); want errors", ttl, first, err1, second, err2)
		}
		if ttl > 0 {
			continue
		}
		held, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !held.Acquired {
			t.Fatalf("Claim with a good ttl = %+v, %v", held, err)
		}
		if err := s.Complete(ctx, k, held.Token, idempotency.Response{Status: 201}, ttl); err == nil || errors.Is(err, idempotency.ErrStaleToken) {
			t.Errorf("Complete with ttl %v = %v, want an error other than ErrStaleToken", ttl, err)
		}
		tx, err := s.BeginTx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Claim(ctx, key(fmt.Sprint("txttl", int64(ttl))), "fp", ttl); err == nil {
			t.Errorf("Tx.Claim with ttl %v succeeded, want an error", ttl)
		}
		_ = tx.Rollback(ctx)
	}
}

// TestSubMicrosecondLeaseRefused: a lease is sent in whole microseconds, so
// one under a microsecond would be a claim lapsed at birth, which any
// duplicate could take over. It is refused like a lease of zero, with the
// same error, by Claim and Renew (as redisstore refuses it), and changes
// nothing.
func TestSubMicrosecondLeaseRefused(t *testing.T) {
	s := newStore(t, newPool(t))
	ctx := ctxT(t)
	for _, lease := range []time.Duration{0, time.Nanosecond, time.Microsecond - time.Nanosecond} {
		k := key(fmt.Sprint("sublease", int64(lease)))
		r, err := s.Claim(ctx, k, "fp", lease, time.Hour)
		if !errors.Is(err, pgstore.ErrNonPositiveLease) {
			t.Errorf("Claim with lease %v = %+v, %v; want ErrNonPositiveLease", lease, r, err)
		}
		if e, found, err := s.Get(ctx, k); err != nil || found {
			t.Errorf("after Claim with lease %v Get = %+v, %v, %v; want nothing", lease, e, found, err)
		}
		held, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !held.Acquired {
			t.Fatalf("Claim with a good lease = %+v, %v", held, err)
		}
		if err := s.Renew(ctx, k, held.Token, lease); !errors.Is(err, pgstore.ErrNonPositiveLease) {
			t.Errorf("Renew with lease %v = %v; want ErrNonPositiveLease", lease, err)
		}
		if e, _, err := s.Get(ctx, k); err != nil || e.LeaseRemaining < 30*time.Second {
			t.Errorf("after a refused Renew with lease %v Get = %+v, %v; want the minute's lease", lease, e, err)
		}
	}
	// A microsecond is the unit: kept.
	r, err := s.Claim(ctx, key("sublease-unit"), "fp", time.Microsecond, time.Hour)
	if err != nil || !r.Acquired {
		t.Errorf("Claim with a lease of 1µs = %+v, %v; want acquired", r, err)
	}
}
