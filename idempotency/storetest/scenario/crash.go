package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// CrashLease is the lease the stores' tests give Crash: short enough to keep
// the scenario within a few seconds, long enough that renewals every 333ms
// keep it alive on a loaded 2-core machine running every package under
// -race (150ms lost renewals there and let B take over a live A).
const CrashLease = time.Second

// errFrozen is what a frozen instance's store calls fail with.
var errFrozen = errors.New("scenario: instance is frozen")

// Crash runs one request into a handler on instance A that blocks, then
// kills A (its server's connections are closed and its request contexts
// cancelled) and freezes it: A's lease renewals stop reaching the store, as
// a dead or paused process's would. It checks that retries of the same
// request on instance B, sent all through A's first lease and past it
// (several between two renewals), answer 409 while A is alive, that one
// then takes the key over once A is dead (a greater fencing token, the
// handler runs on B), that when A's handler wakes and returns while B's
// handler still holds the key, A's late completion is refused by the store
// with idempotency.ErrStaleToken and leaves B's claim alone, and that B
// then answers 201 and its outcome is the one stored and replayed. It does
// so twice, in subtests: in LateComplete, A's handler answers 201 when it
// wakes, so that A completes the claim; in LateRelease, it answers 503, so
// that A releases it, and that Release must be refused likewise (a store
// that released B's claim would let a third instance run the operation
// beside B).
//
// With a TxStore, the Middleware runs in transactional mode and there is no
// lease: killing A rolls back A's transaction, as the database does when a
// client's connection dies, so B takes over at once, and A's late Complete
// or Commit fails. There is no LateRelease then: a failed handler's
// transaction rolls back, and releases nothing.
//
// lease is given to both instances through idempotency.WithLease after opts.
// The scenario waits about two leases, so keep it short, but not so short
// that a loaded machine misses two renewals in a row (A renews every
// lease/3): CrashLease suits a test run under -race beside other packages.
// Crash adds its own idempotency.WithHook to opts.
func Crash(t *testing.T, store idempotency.Store, lease time.Duration, opts ...idempotency.Option) {
	t.Helper()
	t.Run("LateComplete", func(t *testing.T) { crashOnce(t, store, lease, http.StatusCreated, opts) })
	if _, transactional := store.(idempotency.TxStore); !transactional {
		t.Run("LateRelease", func(t *testing.T) { crashOnce(t, store, lease, http.StatusServiceUnavailable, opts) })
	}
}

// crashOnce runs Crash with A's handler answering late when it wakes.
func crashOnce(t *testing.T, store idempotency.Store, lease time.Duration, late int, opts []idempotency.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newCrash(t, ctx, store, lease)
	c.late = late
	defer c.wakeA()
	defer c.releaseB()
	c.a = startInstance(t, c.storeA, c.handlerA(), append(opts[:len(opts):len(opts)], idempotency.WithLease(lease), c.hookA()))
	c.b = startInstance(t, store, c.handlerB(), append(opts[:len(opts):len(opts)], idempotency.WithLease(lease), c.hookB()))
	c.client = newHTTPClient(t)

	c.runA()
	killed := c.killA()
	c.takeOver(killed)
	tookOver := time.Since(killed)
	c.lateCompletionRefused()
	c.finishB()
	t.Logf("Crash: lease %v, B took over %v after the kill; A's late %s refused", lease, tookOver.Round(time.Millisecond), c.lateCall())
}

// crash is the state of one Crash scenario: instance A, which freezes,
// and instance B, which takes over.
type crash struct {
	t             *testing.T
	ctx           context.Context
	store         idempotency.Store
	lease         time.Duration
	key           string
	late          int // the status A's handler answers when it wakes
	transactional bool
	frozen        *freezable
	storeA        idempotency.Store
	a, b          *instance
	client        *http.Client

	enteredA chan int64
	wake     chan struct{}
	wakeOnce sync.Once
	answerA  chan answer
	tokenA   int64
	eventsA  chan idempotency.Event

	runsB, tokenB atomic.Int64
	keyB          atomic.Value // idempotency.Key, with the scope the options chose
	enteredB      chan struct{}
	proceedB      chan struct{}
	proceedOnce   sync.Once
	aKilled       atomic.Bool
	tookOverB     atomic.Bool
	answerB       chan answer
}

func newCrash(t *testing.T, ctx context.Context, store idempotency.Store, lease time.Duration) *crash {
	c := &crash{t: t, ctx: ctx, store: store, lease: lease, key: testenv.RandomName("crash-"),
		enteredA: make(chan int64, 1), wake: make(chan struct{}), answerA: make(chan answer, 1),
		eventsA: make(chan idempotency.Event, 16), enteredB: make(chan struct{}, 1),
		proceedB: make(chan struct{}), answerB: make(chan answer, 1)}
	_, c.transactional = store.(idempotency.TxStore)
	c.frozen = &freezable{Store: store, settled: make(chan error, 1)}
	c.storeA = c.frozen
	if c.transactional {
		c.storeA = &freezableTx{freezable: c.frozen}
	}
	return c
}

func (c *crash) wakeA()    { c.wakeOnce.Do(func() { close(c.wake) }) }
func (c *crash) releaseB() { c.proceedOnce.Do(func() { close(c.proceedB) }) }

// lateCall names the store call that A's late answer makes.
func (c *crash) lateCall() string {
	if c.late == http.StatusCreated {
		return "Complete"
	}
	return "Release"
}

func (c *crash) send(url string) answer {
	return postJSON(c.ctx, c.client, url+"/transfer", c.key, `{"amount":10}`)
}

// handlerA runs once on A and then sleeps like a frozen process: deaf to
// its context until it wakes.
func (c *crash) handlerA() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := idempotency.TokenFromContext(r.Context())
		select {
		case c.enteredA <- tok:
		default: // a second run; B's checks report it
		}
		<-c.wake
		w.WriteHeader(c.late)
		_, _ = io.WriteString(w, "from A")
	})
}

// handlerB records its runs and, once A is killed, holds the key until
// released: before the kill B must not run at all, and if it does (A's
// renewals failed to keep its lease), it answers at once so that the check
// fails fast instead of blocking until the deadline.
func (c *crash) handlerB() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.runsB.Add(1)
		tok, _ := idempotency.TokenFromContext(r.Context())
		c.tokenB.Store(tok)
		if k, ok := idempotency.ScopedKeyFromContext(r.Context()); ok {
			c.keyB.Store(k)
		}
		select {
		case c.enteredB <- struct{}{}:
		default: // a second run; counted in runsB
		}
		if c.aKilled.Load() {
			<-c.proceedB // hold the key while A wakes up
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, "from B, token %d", tok)
	})
}

func (c *crash) hookA() idempotency.Option {
	return idempotency.WithHook(func(ev idempotency.Event) {
		select {
		case c.eventsA <- ev:
		default:
		}
	})
}

func (c *crash) hookB() idempotency.Option {
	return idempotency.WithHook(func(ev idempotency.Event) {
		if ev.Outcome == idempotency.OutcomeNew && ev.TookOver {
			c.tookOverB.Store(true)
		}
	})
}

// runA starts the request on A and, in lease mode, lets a few renewals
// happen, to prove they keep the lease alive.
func (c *crash) runA() {
	t := c.t
	go func() { c.answerA <- c.send(c.a.srv.URL) }()
	select {
	case c.tokenA = <-c.enteredA:
	case <-c.ctx.Done():
		t.Fatal("scenario: the handler on instance A never ran")
	}
	if c.transactional {
		return
	}
	// Duplicates on B all through A's first lease and past it, a few
	// between any two of A's renewals: a store that lets the claim lapse
	// between renewals (one that keeps less of the lease than it reports)
	// is caught whenever in the renewal cycle its lapse falls.
	end := time.Now().Add(c.lease)
	for past := false; !past; {
		testenv.Pause(c.ctx, c.lease/20)
		past = time.Now().After(end)
		if r := c.send(c.b.srv.URL); r.err != nil || r.status != http.StatusConflict {
			t.Fatalf("while A is alive and renewing, B answered %d %q (err %v), want 409; "+
				"A renews every lease/3, so a lease of %v may be too short for this machine", r.status, r.body, r.err, c.lease)
		}
	}
}

// killA freezes A's store traffic and kills its server, as a dead process.
func (c *crash) killA() time.Time {
	c.aKilled.Store(true)
	c.frozen.freeze()
	c.a.kill()
	if c.transactional {
		c.frozen.rollbackLive(c.ctx)
	}
	return time.Now()
}

// takeOver retries on B until its handler runs: B took the key over.
func (c *crash) takeOver(killed time.Time) {
	t := c.t
	for took := false; !took; {
		go func() { c.answerB <- c.send(c.b.srv.URL) }()
		select {
		case <-c.enteredB:
			took = true
		case r := <-c.answerB:
			if r.err != nil || r.status != http.StatusConflict {
				t.Fatalf("B's retry before the takeover = %d %q err=%v, want 409", r.status, r.body, r.err)
			}
			testenv.Pause(c.ctx, 10*time.Millisecond)
		case <-c.ctx.Done():
			t.Fatalf("scenario: B never took over (still 409 %v after the kill)", time.Since(killed))
		}
	}
	if tb := c.tokenB.Load(); tb <= c.tokenA {
		t.Errorf("B's token %d, want greater than A's %d", tb, c.tokenA)
	}
}

// lateCompletionRefused wakes A while B holds the key: A's completion (its
// Complete or Release) must be refused and leave B's claim alone.
func (c *crash) lateCompletionRefused() {
	t := c.t
	c.wakeA()
	select {
	case err := <-c.frozen.settled:
		if c.transactional {
			if err == nil {
				t.Error("A's late Complete/Commit on its rolled-back transaction succeeded")
			}
		} else if !errors.Is(err, idempotency.ErrStaleToken) {
			t.Errorf("A's late %s = %v, want ErrStaleToken", c.lateCall(), err)
		}
	case <-c.ctx.Done():
		t.Fatal("scenario: A's late completion never reached the store")
	}
	if c.transactional {
		return
	}
	evCtx, evCancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer evCancel()
	select {
	case ev := <-drainUntil(evCtx, c.eventsA, idempotency.OutcomeLeaseLost):
		if ev.Token != c.tokenA {
			t.Errorf("A's lease-lost event has token %d, want %d", ev.Token, c.tokenA)
		}
	case <-evCtx.Done():
		t.Error("A's hook did not report OutcomeLeaseLost within 5s")
	}
	storedKey, _ := c.keyB.Load().(idempotency.Key)
	e, found, err := c.store.Get(c.ctx, storedKey)
	if err != nil || !found || e.State != idempotency.StateInProgress || e.Token != c.tokenB.Load() {
		t.Errorf("after A's late completion Get = %+v, %v, %v; want B's claim in progress with token %d", e, found, err, c.tokenB.Load())
	}
}

// finishB lets B answer, and checks that its outcome is the one stored
// and replayed.
func (c *crash) finishB() {
	t := c.t
	c.releaseB()
	final := <-c.answerB
	if final.err != nil || final.status != http.StatusCreated || final.replayed {
		t.Fatalf("B's answer = %d replayed=%v %q err=%v, want a fresh 201", final.status, final.replayed, final.body, final.err)
	}
	if c.runsB.Load() != 1 {
		t.Errorf("handler on B ran %d times, want 1", c.runsB.Load())
	}
	if !c.transactional && !c.tookOverB.Load() {
		t.Error("B's hook did not report a takeover")
	}
	if r := <-c.answerA; r.err == nil && r.status == http.StatusCreated {
		t.Errorf("the killed instance's client got 201 %q", r.body)
	}
	storedKey, _ := c.keyB.Load().(idempotency.Key)
	e, found, err := c.store.Get(c.ctx, storedKey)
	switch {
	case err != nil:
		t.Errorf("Get: %v", err)
	case !found || e.State != idempotency.StateCompleted || e.Response == nil:
		t.Errorf("stored entry = %+v, %v; want B's completed outcome", e, found)
	case string(e.Response.Body) != string(final.body) || e.Token != c.tokenB.Load():
		t.Errorf("stored outcome %q with token %d, want B's %q with token %d", e.Response.Body, e.Token, final.body, c.tokenB.Load())
	}
	if r := c.send(c.b.srv.URL); r.status != http.StatusCreated || !r.replayed || string(r.body) != string(final.body) {
		t.Errorf("later retry = %d replayed=%v %q, want a replay of B's %q", r.status, r.replayed, r.body, final.body)
	}
}

// drainUntil returns a channel that yields the first event with outcome o.
func drainUntil(ctx context.Context, events <-chan idempotency.Event, o idempotency.Outcome) <-chan idempotency.Event {
	out := make(chan idempotency.Event, 1)
	go func() {
		for {
			select {
			case ev := <-events:
				if ev.Outcome == o {
					out <- ev
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// freezable is instance A's view of the store. Once frozen, its lease
// renewals fail without reaching the store, as a dead or paused process's
// would; its Complete or Release still goes through, to show that the
// store itself refuses it, and its result is reported on settled.
type freezable struct {
	idempotency.Store
	frozen  atomic.Bool
	settled chan error

	mu  sync.Mutex
	txs []idempotency.Tx // transactions begun by A, transactional mode only
}

func (f *freezable) freeze() { f.frozen.Store(true) }

func (f *freezable) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if f.frozen.Load() {
		return errFrozen
	}
	return f.Store.Renew(ctx, k, token, lease)
}

func (f *freezable) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	err := f.Store.Complete(ctx, k, token, resp, ttl)
	f.report(err)
	return err
}

func (f *freezable) Release(ctx context.Context, k idempotency.Key, token int64) error {
	err := f.Store.Release(ctx, k, token)
	f.report(err)
	return err
}

func (f *freezable) report(err error) {
	if f.frozen.Load() {
		select {
		case f.settled <- err:
		default:
		}
	}
}

// rollbackLive rolls back A's transactions, as the database does when the
// connection of a dead client drops.
func (f *freezable) rollbackLive(ctx context.Context) {
	f.mu.Lock()
	txs := f.txs
	f.txs = nil
	f.mu.Unlock()
	for _, tx := range txs {
		_ = tx.Rollback(ctx)
	}
}

// freezableTx is a freezable over a TxStore, so that A's Middleware runs in
// transactional mode too.
type freezableTx struct {
	*freezable
}

var _ idempotency.TxStore = (*freezableTx)(nil)

func (f *freezableTx) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	tx, err := f.Store.(idempotency.TxStore).BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.txs = append(f.txs, tx)
	f.mu.Unlock()
	return &reportingTx{Tx: tx, f: f.freezable}, nil
}

// reportingTx reports the first failure of a frozen A's Complete or Commit,
// or nil when both succeed.
type reportingTx struct {
	idempotency.Tx
	f *freezable
}

func (tx *reportingTx) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	err := tx.Tx.Complete(ctx, k, token, resp, ttl)
	if err != nil {
		tx.f.report(err)
	}
	return err
}

func (tx *reportingTx) Commit(ctx context.Context) error {
	err := tx.Tx.Commit(ctx)
	tx.f.report(err)
	return err
}
