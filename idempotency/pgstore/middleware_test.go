package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// middlewareTests are the middleware tests of both modes over PostgreSQL:
// TestMiddleware runs them on SAFERETRY_POSTGRES_URL as it is,
// TestExecModes in every pgx exec mode, directly and through PgBouncer.
var middlewareTests = []struct {
	name string
	run  func(t *testing.T, tg pgTarget)
}{
	{"TxCommitAndReplay", txMiddlewareCommitAndReplay},
	{"TxRollsBackEverything", txMiddlewareRollsBackEverything},
	{"TxDuplicateWaitsThenReplays", txMiddlewareDuplicateWaitsThenReplays},
	{"TxLockTimeoutAnswers409", txMiddlewareLockTimeoutAnswers409},
	{"TxCrashRetryTakesOverAtOnce", txCrashRetryTakesOverAtOnce},
	{"LeaseCrashTakeoverAndLateCompletionRefused", leaseCrashTakeoverAndLateCompletionRefused},
}

func TestMiddleware(t *testing.T) {
	runMiddlewareTests(t, pgTarget{url: pgURL(t)})
}

func runMiddlewareTests(t *testing.T, tg pgTarget) {
	for _, mt := range middlewareTests {
		t.Run(mt.name, func(t *testing.T) { mt.run(t, tg) })
	}
}

// instance is one application instance: an HTTP server with its own
// Middleware over a shared store.
func instance(t *testing.T, store idempotency.Store, h http.Handler, opts ...idempotency.Option) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(idempotency.Middleware(store, opts...)(h))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handler panics are expected in some tests
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// reply is what one request through the middleware got back.
type reply = testenv.Reply

// post sends one protected request with key to url.
func post(ctx context.Context, url, key, body string) reply {
	return testenv.Post(ctx, nil, url+"/orders", key, body)
}

// orderHandler inserts one business row through the handed-over transaction
// (or the pool in lease mode) and answers 201 with a body naming who ran.
type orderHandler struct {
	pool  *pgxpool.Pool
	table string
	who   string
	runs  atomic.Int64
	// hold, when set, is called after the insert, before answering.
	hold func(ctx context.Context)
	// status overrides 201 when non-zero.
	status int
	// panics makes the handler panic after the insert.
	panics bool
	// dup inserts a second row with the same ref, violating a deferred
	// unique constraint that only the commit checks.
	dup bool
}

func (h *orderHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.runs.Add(1)
	ctx := r.Context()
	key := r.Header.Get(idempotency.HeaderIdempotencyKey)
	ins := func(id string) error {
		q := `INSERT INTO "` + h.table + `" (id, ref) VALUES ($1, $2)`
		if tx, ok := pgstore.TxFromContext(ctx); ok {
			_, err := tx.Exec(ctx, q, id, key)
			return err
		}
		_, err := h.pool.Exec(ctx, q, id, key)
		return err
	}
	if err := ins(fmt.Sprintf("%s-%s-%d", key, h.who, n)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if h.dup {
		if err := ins(fmt.Sprintf("%s-%s-%d-dup", key, h.who, n)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if h.hold != nil {
		h.hold(ctx)
	}
	if h.panics {
		panic("handler bug")
	}
	status := h.status
	if status == 0 {
		status = http.StatusCreated
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"by":%q,"run":%d}`, h.who, n)
}

// ordersTable creates the business table, with a deferred unique constraint
// on ref, dropped at cleanup.
func ordersTable(t *testing.T, pool *pgxpool.Pool, storeTable string) string {
	t.Helper()
	name := storeTable + "_orders"
	_, err := pool.Exec(ctxT(t), `CREATE TABLE "`+name+`" (id text PRIMARY KEY,
		ref text NOT NULL, CONSTRAINT "`+name+`_ref" UNIQUE (ref) DEFERRABLE INITIALLY DEFERRED)`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+name+`"`) })
	return name
}

func txMiddlewareCommitAndReplay(t *testing.T, tg pgTarget) {
	pool := tg.newPool(t)
	s := tg.txStore(t, pool)
	orders := ordersTable(t, pool, s.Table())
	h := &orderHandler{pool: pool, table: orders, who: "a"}
	srv := instance(t, s, h)
	ctx := ctxT(t)
	first := post(ctx, srv.URL, "k1", `{"amount":5}`)
	if first.Err != nil || first.Status != 201 || first.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("first = %+v", first)
	}
	again := post(ctx, srv.URL, "k1", `{ "amount": 5 }`)
	if again.Err != nil || again.Status != 201 || again.Body != first.Body || again.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay = %+v, want %q replayed", again, first.Body)
	}
	if n := count(t, pool, orders); n != 1 || h.runs.Load() != 1 {
		t.Fatalf("business rows %d, handler runs %d; want 1 and 1", n, h.runs.Load())
	}
	other := post(ctx, srv.URL, "k1", `{"amount":6}`)
	if other.Status != http.StatusUnprocessableEntity {
		t.Fatalf("other payload = %+v, want 422", other)
	}
}

func txMiddlewareRollsBackEverything(t *testing.T, tg pgTarget) {
	cases := []struct {
		name   string
		setup  func(h *orderHandler)
		status int // 0: no response (the connection drops after a panic)
	}{
		{"5xx", func(h *orderHandler) { h.status = http.StatusInternalServerError }, 500},
		{"503", func(h *orderHandler) { h.status = http.StatusServiceUnavailable }, 503},
		{"429", func(h *orderHandler) { h.status = http.StatusTooManyRequests }, 429},
		{"panic", func(h *orderHandler) { h.panics = true }, 0},
		{"failed commit", func(h *orderHandler) { h.dup = true }, 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := tg.newPool(t)
			s := tg.txStore(t, pool)
			orders := ordersTable(t, pool, s.Table())
			var events []idempotency.Event
			var mu sync.Mutex
			hook := idempotency.WithHook(func(e idempotency.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
			bad := &orderHandler{pool: pool, table: orders, who: "bad"}
			tc.setup(bad)
			ctx := ctxT(t)
			r := post(ctx, instance(t, s, bad, hook).URL, "k", `{}`)
			if tc.status == 0 {
				if r.Err == nil {
					t.Fatalf("after a panic the client got %+v", r)
				}
			} else if r.Err != nil || r.Status != tc.status {
				t.Fatalf("reply = %+v, want %d", r, tc.status)
			}
			if tc.name == "failed commit" && !strings.Contains(r.Body, idempotency.ProblemCommitFailed) {
				t.Errorf("failed commit body = %s, want the commit-failed problem", r.Body)
			}
			if n := count(t, pool, orders); n != 0 {
				t.Fatalf("business rows after rollback = %d, want 0", n)
			}
			if _, found, err := s.Get(ctx, idempotency.Key{Key: "k"}); err != nil || found {
				t.Fatalf("entry after rollback: found=%v err=%v", found, err)
			}
			// The key is free: a retry runs the handler and succeeds.
			good := &orderHandler{pool: pool, table: orders, who: "good"}
			r2 := post(ctx, instance(t, s, good).URL, "k", `{}`)
			if r2.Err != nil || r2.Status != 201 || good.runs.Load() != 1 || count(t, pool, orders) != 1 {
				t.Fatalf("retry = %+v, runs %d", r2, good.runs.Load())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(events) == 0 || (events[0].Outcome != idempotency.OutcomeReleased && events[0].Outcome != idempotency.OutcomeStoreError) {
				t.Errorf("events = %+v, want a released or store-error outcome", events)
			}
		})
	}
}

// gate blocks handlers until opened, and tells when one is waiting.
type gate struct {
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 16), open: make(chan struct{})} }

func (g *gate) hold(context.Context) {
	g.entered <- struct{}{}
	<-g.open
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// txDuplicate is two instances over one transactional store, a and b. a's
// handler holds the first request with key "k", inside its transaction,
// until g is released; bh is b's handler, for the duplicate.
type txDuplicate struct {
	pool   *pgxpool.Pool
	table  string // the store's table
	orders string // the handlers' business table
	g      *gate
	bh     *orderHandler
	b      *httptest.Server
	first  chan reply // the first request's answer, once g is released
}

// startTxDuplicate starts a txDuplicate whose store waits up to lockTimeout
// for a key held by another transaction, sends the first request to a and
// returns once a's handler holds it.
func startTxDuplicate(t *testing.T, tg pgTarget, ctx context.Context, lockTimeout time.Duration) *txDuplicate {
	t.Helper()
	pool := tg.newPool(t)
	s := tg.txStore(t, pool, pgstore.WithLockTimeout(lockTimeout))
	orders := ordersTable(t, pool, s.Table())
	g := newGate()
	t.Cleanup(g.release)
	a := instance(t, s, &orderHandler{pool: pool, table: orders, who: "a", hold: g.hold})
	bh := &orderHandler{pool: pool, table: orders, who: "b"}
	d := &txDuplicate{pool: pool, table: s.Table(), orders: orders, g: g, bh: bh, b: instance(t, s, bh), first: make(chan reply, 1)}
	go func() { d.first <- post(ctx, a.URL, "k", `{}`) }()
	<-g.entered
	return d
}

func txMiddlewareDuplicateWaitsThenReplays(t *testing.T, tg pgTarget) {
	ctx := ctxT(t)
	d := startTxDuplicate(t, tg, ctx, 20*time.Second)
	dupCh := make(chan reply, 1)
	go func() { dupCh <- post(ctx, d.b.URL, "k", `{}`) }()
	waitBlocked(t, d.pool, d.table)
	d.g.release()
	first, dup := <-d.first, <-dupCh
	if first.Err != nil || first.Status != 201 {
		t.Fatalf("first = %+v", first)
	}
	if dup.Err != nil || dup.Status != 201 || dup.Body != first.Body || dup.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("duplicate = %+v, want a replay of %s", dup, first.Body)
	}
	if d.bh.runs.Load() != 0 || count(t, d.pool, d.orders) != 1 {
		t.Fatalf("duplicate ran its handler (%d) or rows = %d", d.bh.runs.Load(), count(t, d.pool, d.orders))
	}
}

func txMiddlewareLockTimeoutAnswers409(t *testing.T, tg pgTarget) {
	ctx := ctxT(t)
	d := startTxDuplicate(t, tg, ctx, 50*time.Millisecond)
	dup := post(ctx, d.b.URL, "k", `{}`)
	if dup.Err != nil || dup.Status != http.StatusConflict || dup.Header.Get("Retry-After") == "" ||
		!strings.Contains(dup.Body, idempotency.ProblemInProgress) {
		t.Fatalf("duplicate during the lock timeout = %+v, want 409 in progress with Retry-After", dup)
	}
	d.g.release()
	if first := <-d.first; first.Err != nil || first.Status != 201 {
		t.Fatalf("first = %+v", first)
	}
	if d.bh.runs.Load() != 0 {
		t.Fatal("the duplicate ran its handler")
	}
}

// cutStore stands for the network between one instance and the database:
// once cut, every call fails, as if the instance's process had frozen or
// lost its connection.
type cutStore struct {
	idempotency.Store
	cut atomic.Bool
}

var errCut = errors.New("test: instance cut off")

func (c *cutStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if c.cut.Load() {
		return idempotency.ClaimResult{}, errCut
	}
	return c.Store.Claim(ctx, k, fp, lease, ttl)
}

func (c *cutStore) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Store.Renew(ctx, k, token, lease)
}

func (c *cutStore) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Store.Complete(ctx, k, token, resp, ttl)
}

func leaseCrashTakeoverAndLateCompletionRefused(t *testing.T, tg pgTarget) {
	pool := tg.newPool(t)
	s := tg.store(t, nil)
	orders := ordersTableNoUnique(t, pool, s.Table())
	// Short, so that the takeover comes soon; long enough that a claim on
	// a loaded machine answers within half of it (or a starts no handler).
	const lease = 300 * time.Millisecond
	g := newGate()
	t.Cleanup(g.release)
	cut := &cutStore{Store: s}
	var aEvents []idempotency.Event
	var mu sync.Mutex
	hookA := idempotency.WithHook(func(e idempotency.Event) { mu.Lock(); aEvents = append(aEvents, e); mu.Unlock() })
	ah := &orderHandler{pool: pool, table: orders, who: "a", hold: g.hold}
	a := instance(t, cut, ah, idempotency.WithLease(lease), hookA)
	bh := &orderHandler{pool: pool, table: orders, who: "b"}
	b := instance(t, s, bh, idempotency.WithLease(lease))
	ctx := ctxT(t)
	// Warm up: a's claim below must answer within half of its short lease,
	// which a first connection (or a first statement description, in some
	// exec modes) on a loaded machine may not.
	if r := post(ctx, b.URL, "warm", `{}`); r.Err != nil || r.Status != 201 {
		t.Fatalf("warm-up = %+v", r)
	}

	firstCh := make(chan reply, 1)
	go func() { firstCh <- post(ctx, a.URL, "k", `{}`) }()
	select {
	case <-g.entered:
	case r := <-firstCh:
		t.Fatalf("the first request ended before its handler ran: %+v", r)
	}
	// Instance a dies mid-handler: cut off from the database, its clients
	// disconnected. Its handler is frozen, not gone.
	cut.cut.Store(true)
	a.CloseClientConnections()
	if r := <-firstCh; r.Err == nil {
		t.Fatalf("client of the dead instance got %+v", r)
	}
	// The retry on b waits for the lease to lapse, then takes over.
	var got reply
	testenv.Eventually(t, "the retry on b takes over", func() bool {
		got = post(ctx, b.URL, "k", `{}`)
		if got.Status == http.StatusConflict {
			return false
		}
		return true
	})
	if got.Err != nil || got.Status != 201 || !strings.Contains(got.Body, `"by":"b"`) {
		t.Fatalf("retry on b = %+v", got)
	}
	// a wakes up and finishes: its completion must be refused.
	cut.cut.Store(false)
	g.release()
	testenv.Eventually(t, "a notices its lease is lost", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range aEvents {
			if e.Outcome == idempotency.OutcomeLeaseLost {
				return true
			}
		}
		return false
	})
	e, found, err := s.Get(ctx, idempotency.Key{Key: "k"})
	if err != nil || !found || e.State != idempotency.StateCompleted || !strings.Contains(string(e.Response.Body), `"by":"b"`) {
		t.Fatalf("stored entry = %+v %v %v; want b's outcome", e, found, err)
	}
	if r := post(ctx, b.URL, "k", `{}`); r.Body != got.Body || r.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay = %+v, want b's body", r)
	}
}

// ordersTableNoUnique is ordersTable without the ref constraint: in lease
// mode a crashed holder's write stays, so two rows per key are expected.
func ordersTableNoUnique(t *testing.T, pool *pgxpool.Pool, storeTable string) string {
	t.Helper()
	name := storeTable + "_orders"
	if _, err := pool.Exec(ctxT(t), `CREATE TABLE "`+name+`" (id text PRIMARY KEY, ref text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+name+`"`) })
	return name
}

func txCrashRetryTakesOverAtOnce(t *testing.T, tg pgTarget) {
	pool := tg.newPool(t)
	s := tg.txStore(t, pool, pgstore.WithLockTimeout(20*time.Second))
	orders := ordersTable(t, pool, s.Table())
	pids := make(chan int, 1)
	g := newGate()
	t.Cleanup(g.release)
	ah := &orderHandler{pool: pool, table: orders, who: "a", hold: func(ctx context.Context) {
		tx, _ := pgstore.TxFromContext(ctx)
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Errorf("pid: %v", err)
		}
		pids <- pid
		g.hold(ctx)
	}}
	a := instance(t, s, ah)
	bh := &orderHandler{pool: pool, table: orders, who: "b"}
	b := instance(t, s, bh)
	ctx := ctxT(t)
	firstCh := make(chan reply, 1)
	go func() { firstCh <- post(ctx, a.URL, "k", `{}`) }()
	pid := <-pids
	<-g.entered
	// Instance a dies: its database session ends (PostgreSQL rolls its
	// transaction back) and its clients are disconnected.
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	a.CloseClientConnections()
	if r := <-firstCh; r.Err == nil {
		t.Fatalf("client of the dead instance got %+v", r)
	}
	// No lease to wait for: the retry on b runs at once.
	got := post(ctx, b.URL, "k", `{}`)
	if got.Err != nil || got.Status != 201 || !strings.Contains(got.Body, `"by":"b"`) {
		t.Fatalf("retry on b = %+v", got)
	}
	// a's frozen handler wakes up; its commit cannot succeed.
	g.release()
	// Close waits for a's request, middleware included, to end: its
	// Complete and Commit have been tried before the checks below.
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("a's request never ended")
	}
	if n := count(t, pool, orders); n != 1 {
		t.Fatalf("business rows = %d, want only b's", n)
	}
	e, found, err := s.Get(ctx, idempotency.Key{Key: "k"})
	if err != nil || !found || !strings.Contains(string(e.Response.Body), `"by":"b"`) {
		t.Fatalf("stored entry = %+v %v %v; want b's outcome", e, found, err)
	}
}
