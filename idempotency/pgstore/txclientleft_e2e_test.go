package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// warnLog is a slog.Handler that keeps the messages logged at Warn or
// above.
type warnLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *warnLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *warnLog) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *warnLog) WithGroup(string) slog.Handler                 { return l }
func (l *warnLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}

func (l *warnLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// clientLeftCase is one moment at which the client of a transactional
// request leaves, and what must become of the request.
type clientLeftCase struct {
	name string
	// handler runs after the handler's insert; hold is the advisory lock
	// the test holds; entered is closed once the client may leave.
	handler func(w http.ResponseWriter, r *http.Request, tx pgx.Tx, hold int64, entered chan<- struct{})
	// blockedCommit: the orders table's deferred trigger waits for the
	// test's advisory lock, so that the request's COMMIT is in flight
	// when the client leaves.
	blockedCommit bool
	committed     bool // the writes and the answer commit (replayable)
}

var clientLeftCases = []clientLeftCase{
	{name: "MidStatement", handler: func(w http.ResponseWriter, r *http.Request, tx pgx.Tx, hold int64, entered chan<- struct{}) {
		// Blocks on the test's advisory lock until the client left.
		close(entered)
		if _, err := tx.Exec(r.Context(), `SELECT pg_advisory_xact_lock($1)`, hold); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}},
	{name: "BetweenStatements", handler: func(w http.ResponseWriter, r *http.Request, tx pgx.Tx, _ int64, entered chan<- struct{}) {
		close(entered)
		<-r.Context().Done()
		if _, err := tx.Exec(r.Context(), `SELECT 1`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}},
	{name: "AnsweredAfterLeaving", committed: true, handler: func(w http.ResponseWriter, r *http.Request, _ pgx.Tx, _ int64, entered chan<- struct{}) {
		close(entered)
		<-r.Context().Done()
		w.WriteHeader(http.StatusCreated)
	}},
	{name: "AfterAnswerBeforeCommit", committed: true, handler: func(w http.ResponseWriter, r *http.Request, _ pgx.Tx, _ int64, entered chan<- struct{}) {
		w.WriteHeader(http.StatusCreated)
		close(entered)
		<-r.Context().Done()
	}},
	{name: "DuringCommit", committed: true, blockedCommit: true, handler: func(w http.ResponseWriter, r *http.Request, _ pgx.Tx, _ int64, entered chan<- struct{}) {
		w.WriteHeader(http.StatusCreated)
		close(entered)
	}},
}

// TestTxClientLeft: a client that leaves a transactional request at each
// moment of it, in every exec mode, directly and through PgBouncer in
// transaction pooling: the key is free again when nothing committed and
// replayed when the request committed, the handler's writes are all or
// nothing, no connection is left acquired or in a transaction, and
// nothing is logged at Warn or above.
func TestTxClientLeft(t *testing.T) {
	direct := pgURL(t)
	targets := map[string]pgTarget{}
	for _, mode := range execModes {
		targets["direct/"+modeName(mode)] = pgTarget{url: direct, mode: mode}
	}
	bouncer := testenv.PgBouncerURL(t)
	for _, mode := range execModes {
		if !unsafeBehindPgBouncer(mode) {
			targets["pgbouncer/"+modeName(mode)] = pgTarget{url: bouncer, mode: mode, listenURL: direct}
		}
	}
	for name, tg := range targets {
		t.Run(name, func(t *testing.T) {
			for _, c := range clientLeftCases {
				t.Run(c.name, func(t *testing.T) { runClientLeft(t, tg, direct, c) })
			}
		})
	}
	// A pool whose statements cut short by their context are cancelled
	// on the server (the connection stays open, its transaction failed)
	// rather than closed, as pgx does by default.
	cancelRequest := func(c *pgxpool.Config) {
		c.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc}
		}
	}
	for name, url := range map[string]string{"direct": direct, "pgbouncer": bouncer} {
		t.Run(name+"/cancel_request", func(t *testing.T) {
			for _, c := range clientLeftCases {
				tg := pgTarget{url: url, mode: pgx.QueryExecModeExec}
				if name == "pgbouncer" {
					tg.listenURL = direct
				}
				t.Run(c.name, func(t *testing.T) { runClientLeft(t, tg, direct, c, cancelRequest) })
			}
		})
	}
}

var holdIDs atomic.Int64

func runClientLeft(t *testing.T, tg pgTarget, direct string, c clientLeftCase, mutate ...func(*pgxpool.Config)) {
	ctx := ctxT(t)
	logs := &warnLog{}
	logger := slog.New(logs)
	pool := tg.newPool(t, mutate...)
	dpool := pgTarget{url: direct}.newPool(t)
	s := tg.txStore(t, pool, pgstore.WithLogger(logger))
	orders := ordersTable(t, dpool, s.Table())
	hold := 0x5eed0000 + holdIDs.Add(1)
	if c.blockedCommit {
		fn := orders + "_wait"
		if _, err := dpool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION "%[1]s"() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_xact_lock(%[2]d); RETURN NULL; END $$;
			CREATE CONSTRAINT TRIGGER "%[1]s" AFTER INSERT ON "%[3]s" DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION "%[1]s"()`, fn, hold, orders)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			dpool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+orders+`"`)
			dpool.Exec(context.Background(), `DROP FUNCTION IF EXISTS "`+fn+`"()`)
		})
	}
	// The test's advisory lock, on a direct connection of its own.
	lockConn, err := dpool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Release()
	if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_lock($1)`, hold); err != nil {
		t.Fatal(err)
	}
	var unlockOnce sync.Once
	unlock := func() {
		unlockOnce.Do(func() {
			if _, err := lockConn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, hold); err != nil {
				t.Error(err)
			}
		})
	}
	defer unlock()

	entered := make(chan struct{})
	reqDone := make(chan struct{})
	var events []idempotency.Event
	var mu sync.Mutex
	evDone := make(chan struct{}, 4)
	hook := idempotency.WithHook(func(e idempotency.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
		evDone <- struct{}{}
	})
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) > 1 {
			// The retry.
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, "retry")
			return
		}
		go func() { <-r.Context().Done(); close(reqDone) }()
		tx, ok := pgstore.TxFromContext(r.Context())
		if !ok {
			t.Error("no transaction")
			return
		}
		if _, err := tx.Exec(r.Context(), `INSERT INTO "`+orders+`" (id, ref) VALUES ('first', 'k')`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		c.handler(w, r, tx, hold, entered)
	})
	srv := instance(t, s, h, hook, idempotency.WithLogger(logger))

	cctx, leave := context.WithCancel(ctx)
	replied := make(chan reply, 1)
	go func() { replied <- post(cctx, srv.URL, "k", `{}`) }()
	<-entered
	waitAdvisory := func() {
		testenv.Eventually(t, "a statement waits for the test's advisory lock", func() bool {
			var n int
			if err := dpool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND objid = ($1::bigint & 4294967295)::oid`, hold).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		})
	}
	if c.name == "MidStatement" || c.blockedCommit {
		waitAdvisory()
	}
	leave()
	<-reqDone
	if r := <-replied; r.Err == nil {
		t.Fatalf("the client that left got %+v", r)
	}
	if c.blockedCommit {
		unlock()
	}
	<-evDone
	if c.name == "MidStatement" {
		unlock()
	}
	testenv.Eventually(t, "no connection of the pool is acquired", func() bool { return pool.Stat().AcquiredConns() == 0 })
	// No server connection is left in a transaction (through PgBouncer
	// too), once the backend of a statement cut short ended.
	testenv.Eventually(t, "no backend is left in the request's transaction", func() bool {
		var n int
		if err := dpool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE relation IN (to_regclass($1), to_regclass($2)) AND pid <> pg_backend_pid()`,
			`"`+orders+`"`, `"`+s.Table()+`"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	mu.Lock()
	ev := events[0]
	mu.Unlock()
	want := 0
	if c.committed {
		want = 1
		if ev.Outcome != idempotency.OutcomeNew {
			t.Errorf("event = %+v, want new", ev)
		}
	} else if ev.Outcome != idempotency.OutcomeReleased {
		t.Errorf("event = %+v, want released", ev)
	}
	if n := count(t, dpool, orders); n != want {
		t.Errorf("business rows = %d, want %d", n, want)
	}
	retry := post(ctx, srv.URL, "k", `{}`)
	if c.committed {
		if retry.Err != nil || retry.Status != http.StatusCreated || !retry.Replayed {
			t.Errorf("retry = %+v, want the 201 replayed", retry)
		}
	} else if retry.Err != nil || retry.Status != http.StatusCreated || retry.Replayed || retry.Body != "retry" {
		t.Errorf("retry = %+v, want the handler run again", retry)
	}
	if msgs := logs.all(); len(msgs) > 0 {
		t.Errorf("logged at Warn or above:\n%s", strings.Join(msgs, "\n"))
	}
}
