package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestStorePanicWhileSettlingGivesOneEvent checks that a request whose
// store panics while its outcome is recorded (Complete, or the Release
// after a 5xx or a handler's panic) still gives its one event, as
// transactional mode does: OutcomeStoreError, with no status, since
// nothing was sent. Without it, metrics fed by the hook miss the request.
func TestStorePanicWhileSettlingGivesOneEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int  // the handler's
		panics bool // the handler panics too
	}{
		{"complete", http.StatusCreated, false},
		{"release after a 5xx", http.StatusBadGateway, false},
		{"release after a handler panic", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &faultyStore{Store: newStore(t),
				complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
					panic("store bug")
				},
				release: func(context.Context, idempotency.Key, int64) error { panic("store bug") },
			}
			var mu sync.Mutex
			var events []idempotency.Event
			hook := func(e idempotency.Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			}
			h := idempotency.Middleware(st, idempotency.WithHook(hook))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.panics {
					panic("handler bug")
				}
				w.WriteHeader(tc.status)
			}))
			func() {
				defer func() { _ = recover() }()
				post(h, "k", `{}`)
			}()
			mu.Lock()
			defer mu.Unlock()
			if len(events) != 1 {
				t.Fatalf("%d events %v, want 1", len(events), events)
			}
			if e := events[0]; e.Outcome != idempotency.OutcomeStoreError || e.Status != 0 || e.Err == nil {
				t.Errorf("event %s status %d err %v, want %s, no status, an error", e.Outcome, e.Status, e.Err, idempotency.OutcomeStoreError)
			}
		})
	}
}

// TestTxStorePanicEventHasNoStatus checks that the OutcomeStoreError event
// of a transactional request whose Commit panicked carries no status:
// nothing of the buffered response was sent (Event.Status).
func TestTxStorePanicEventHasNoStatus(t *testing.T) {
	st := &fakeTxStore{Store: newStore(t), panicCommit: true}
	var events []idempotency.Event
	mw := idempotency.Middleware(st, idempotency.WithHook(func(e idempotency.Event) { events = append(events, e) }))(&counter{})
	func() {
		defer func() { _ = recover() }()
		post(mw, "k", `{}`)
	}()
	if len(events) != 1 {
		t.Fatalf("%d events %v, want 1", len(events), events)
	}
	if e := events[0]; e.Outcome != idempotency.OutcomeStoreError || e.Status != 0 {
		t.Errorf("event %s status %d, want %s with no status (nothing was sent)", e.Outcome, e.Status, idempotency.OutcomeStoreError)
	}
}

// TestKeeperPanicWithSupersededClaimGivesOneEvent checks that a request
// whose lease keeper recovered a panic (the store's Renew) and whose claim
// turns out taken over, by the keeper's next renewal or by Complete, still
// gives its one event, OutcomeLeaseLost, before the keeper's panic goes on:
// record used to re-panic before finish reported the lost lease.
func TestKeeperPanicWithSupersededClaimGivesOneEvent(t *testing.T) {
	const lease = 9 * time.Second
	for _, tc := range []struct {
		name string
		// byRenewal: the second renewal answers ErrStaleToken; otherwise
		// Complete does.
		byRenewal bool
	}{
		{"taken over, seen by a renewal", true},
		{"taken over, seen by Complete", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(fakeStart)
			base := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
			var renewals atomic.Int64
			st := &faultyStore{Store: base,
				renew: func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
					switch n := renewals.Add(1); {
					case n == 1:
						panic("renew broke")
					case tc.byRenewal:
						return idempotency.ErrStaleToken
					}
					return base.Renew(ctx, k, tok, l)
				},
				complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
					return idempotency.ErrStaleToken
				},
			}
			var mu sync.Mutex
			var events []idempotency.Event
			hook := func(e idempotency.Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			}
			entered, release := make(chan struct{}), make(chan struct{})
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				select {
				case <-release:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusCreated)
			})
			h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk), idempotency.WithHook(hook))(app)
			panicked := make(chan any, 1)
			go func() {
				defer func() { panicked <- recover() }()
				post(h, "k", `{}`)
			}()
			<-entered
			want := int64(1)
			if tc.byRenewal {
				want = 2
			}
			for i := range want {
				testenv.Eventually(t, "the lease keeper's timer is armed", func() bool { return clk.Pending() > 0 })
				clk.Advance(lease / 3)
				testenv.Eventually(t, fmt.Sprintf("renewal %d", i+1), func() bool { return renewals.Load() >= i+1 })
			}
			close(release)
			var p any
			select {
			case p = <-panicked:
			case <-time.After(testenv.Patience):
				t.Fatal("the request never finished")
			}
			if got := fmt.Sprint(p); !strings.Contains(got, "renew broke") {
				t.Errorf("the request went on with panic %q, want the keeper's", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(events) != 1 {
				t.Fatalf("%d events %v, want 1", len(events), events)
			}
			if e := events[0]; e.Outcome != idempotency.OutcomeLeaseLost || !errors.Is(e.Err, idempotency.ErrLeaseLost) {
				t.Errorf("event %s err %v, want %s", e.Outcome, e.Err, idempotency.OutcomeLeaseLost)
			}
		})
	}
}

// TestTxRollbackPanicGivesOneEvent checks that a transactional request
// whose store's Rollback panics (after a Commit that panicked or failed, a
// status that is not stored, or a handler's panic) still gives its one
// event, OutcomeStoreError with no status, before the first panic goes on:
// the Rollback's when nothing panicked before it, but the Commit's or the
// handler's when the Rollback cleans up after one, since that one tells
// what broke (the Rollback's is dropped). The event used to be emitted
// after the rollback, so it was lost.
func TestTxRollbackPanicGivesOneEvent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int  // the handler's
		panics      bool // the handler panics
		panicCommit bool
		commitErr   error
		want        string // the panic that goes on
	}{
		{name: "commit panicked", status: http.StatusCreated, panicCommit: true, want: "driver bug"},
		{name: "commit failed", status: http.StatusCreated, commitErr: errors.New("connection reset"), want: "driver bug in rollback"},
		{name: "status not stored", status: http.StatusBadGateway, want: "driver bug in rollback"},
		{name: "handler panicked", panics: true, want: "handler bug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &fakeTxStore{Store: newStore(t), panicRollback: true, panicCommit: tc.panicCommit, commitErr: tc.commitErr}
			var events []idempotency.Event
			app := &counter{before: func(http.ResponseWriter, *http.Request) int {
				if tc.panics {
					panic("handler bug")
				}
				return tc.status
			}}
			mw := idempotency.Middleware(st, idempotency.WithHook(func(e idempotency.Event) { events = append(events, e) }))(app)
			p := postPanicking(mw)
			if got := fmt.Sprint(p); got != tc.want {
				t.Errorf("the request went on with panic %q, want %q", got, tc.want)
			}
			if len(events) != 1 {
				t.Fatalf("%d events %v, want 1", len(events), events)
			}
			if e := events[0]; e.Outcome != idempotency.OutcomeStoreError || e.Status != 0 || e.Err == nil {
				t.Errorf("event %s status %d err %v, want %s, no status, an error", e.Outcome, e.Status, e.Err, idempotency.OutcomeStoreError)
			}
		})
	}
}

// TestKeeperPanicEventHasTheStatusSent checks that a request whose lease
// keeper recovered a panic (the store's Renew) and whose outcome was then
// stored gives its event with the status that went out, none: the
// keeper's panic goes on in place of the buffered response, so the
// handler's 201 never reaches the client (a retry replays it).
func TestKeeperPanicEventHasTheStatusSent(t *testing.T) {
	const lease = 9 * time.Second
	clk := clock.NewManual(fakeStart)
	base := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
	var renewals atomic.Int64
	st := &faultyStore{Store: base, renew: func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
		if renewals.Add(1) == 1 {
			panic("renew broke")
		}
		return base.Renew(ctx, k, tok, l)
	}}
	var ev events
	app, entered, release := blockFirst()
	h := idempotency.Middleware(st, idempotency.WithLease(lease), idempotency.WithClock(clk), idempotency.WithHook(ev.hook))(app)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		post(h, "k", `{}`)
	}()
	<-entered
	testenv.Eventually(t, "the lease keeper's timer is armed", func() bool { return clk.Pending() > 0 })
	clk.Advance(lease / 3)
	testenv.Eventually(t, "the first renewal", func() bool { return renewals.Load() >= 1 })
	close(release)
	var p any
	select {
	case p = <-panicked:
	case <-time.After(testenv.Patience):
		t.Fatal("the request never finished")
	}
	if got := fmt.Sprint(p); !strings.Contains(got, "renew broke") {
		t.Fatalf("the request went on with panic %q, want the keeper's", got)
	}
	got := ev.outcomes()
	if len(got) != 1 || got[0] != idempotency.OutcomeNew {
		t.Fatalf("events %v, want one %s (the outcome is stored)", got, idempotency.OutcomeNew)
	}
	if e, _ := ev.find(idempotency.OutcomeNew); e.Status != 0 {
		t.Errorf("event status %d, want none: the response was not sent", e.Status)
	}
}

// TestLeaseAbortKeepsTheHandlersPanic checks that a lease-mode request
// whose handler panicked goes on with the handler's panic though the
// release that follows panics too (the store's Release, or the logger as
// it reports a Release that failed): the handler's bug is what broke, the
// later panic a consequence of it, dropped. The request still gives its
// one event, OutcomeStoreError when the store's call panicked, with the
// status that went out: none, or the handler's when its response
// streamed before the panic.
func TestLeaseAbortKeepsTheHandlersPanic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release func(context.Context, idempotency.Key, int64) error
		logger  *slog.Logger
		stream  bool // the handler's response streams before its panic
		want    idempotency.Outcome
		status  int
	}{
		{name: "release panics",
			release: func(context.Context, idempotency.Key, int64) error { panic("store bug") },
			want:    idempotency.OutcomeStoreError},
		{name: "release panics after the response streamed", stream: true,
			release: func(context.Context, idempotency.Key, int64) error { panic("store bug") },
			want:    idempotency.OutcomeStoreError, status: http.StatusCreated},
		{name: "logger panics on a failed release",
			release: func(context.Context, idempotency.Key, int64) error { return errors.New("connection reset") },
			logger:  slog.New(panickingLog{}),
			want:    idempotency.OutcomeReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &faultyStore{Store: newStore(t), release: tc.release}
			var ev events
			opts := []idempotency.Option{idempotency.WithHook(ev.hook), idempotency.WithMaxResponseBody(8)}
			if tc.logger != nil {
				opts = append(opts, idempotency.WithLogger(tc.logger))
			}
			h := idempotency.Middleware(st, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.stream {
					w.WriteHeader(http.StatusCreated)
					_, _ = w.Write([]byte("more than eight bytes"))
				}
				panic("handler bug")
			}))
			p := postPanicking(h)
			if got := fmt.Sprint(p); got != "handler bug" {
				t.Errorf("the request went on with panic %q, want the handler's", got)
			}
			got := ev.outcomes()
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("events %v, want one %s", got, tc.want)
			}
			if e, _ := ev.find(tc.want); e.Status != tc.status || e.Err == nil {
				t.Errorf("event status %d err %v, want status %d and an error", e.Status, e.Err, tc.status)
			}
		})
	}
}
