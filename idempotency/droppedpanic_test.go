package idempotency_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestDroppedPanicIsLogged checks that a panic the Middleware drops while
// it cleans up after an earlier one (the store's Release or Rollback, a
// hook's on the event) is logged at the error level with its value and
// the stack where it was raised, so that the store's bug can be found
// though its panic never reaches a recovery handler: after a handler's
// panic, and after a handler's runtime.Goexit, which no recovery handler
// sees either. The one event still says the store panicked. The dropped
// panic used to leave no trace.
func TestDroppedPanicIsLogged(t *testing.T) {
	releaseBug := func(context.Context, idempotency.Key, int64) error { panic("store bug") }
	for _, tc := range []struct {
		name      string
		store     func(t *testing.T) idempotency.Store
		hookPanic bool
		goexit    bool // the handler calls runtime.Goexit instead of panicking
		want      string
		stack     string // a frame of the dropped panic's stack
		outcome   idempotency.Outcome
	}{
		{name: "release after a handler panic",
			store: func(t *testing.T) idempotency.Store { return &faultyStore{Store: newStore(t), release: releaseBug} },
			want:  "store bug", stack: "TestDroppedPanicIsLogged", outcome: idempotency.OutcomeStoreError},
		{name: "release after a handler's Goexit", goexit: true,
			store: func(t *testing.T) idempotency.Store { return &faultyStore{Store: newStore(t), release: releaseBug} },
			want:  "store bug", stack: "TestDroppedPanicIsLogged", outcome: idempotency.OutcomeStoreError},
		{name: "rollback after a handler panic",
			store: func(t *testing.T) idempotency.Store { return &fakeTxStore{Store: newStore(t), panicRollback: true} },
			want:  "driver bug in rollback", stack: "fakeTx).Rollback", outcome: idempotency.OutcomeStoreError},
		{name: "hook on a handler panic", hookPanic: true,
			store: func(t *testing.T) idempotency.Store { return newStore(t) },
			want:  "hook bug", stack: "TestDroppedPanicIsLogged", outcome: idempotency.OutcomeReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf testkit.SyncBuffer
			var ev events
			opts := []idempotency.Option{idempotency.WithHook(ev.hook),
				idempotency.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil)))}
			if tc.hookPanic {
				opts = append(opts, idempotency.WithHook(func(idempotency.Event) { panic("hook bug") }))
			}
			h := idempotency.Middleware(tc.store(t), opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				if tc.goexit {
					runtime.Goexit()
				}
				panic("handler bug")
			}))
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				post(h, "k", `{}`)
			}()
			select {
			case p := <-done:
				if want := map[bool]any{false: "handler bug", true: nil}[tc.goexit]; p != want {
					t.Errorf("the request went on with panic %v, want %v", p, want)
				}
			case <-time.After(testenv.Patience):
				t.Fatal("the request never finished")
			}
			if got := ev.outcomes(); len(got) != 1 || got[0] != tc.outcome {
				t.Errorf("events %v, want one %s", got, tc.outcome)
			}
			var found bool
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec struct {
					Level, Panic, Stack string
				}
				if json.Unmarshal([]byte(line), &rec) != nil || rec.Panic != tc.want {
					continue
				}
				found = true
				if rec.Level != "ERROR" || !strings.Contains(rec.Stack, tc.stack) {
					t.Errorf("the dropped panic was logged at %s with a stack without %q:\n%s", rec.Level, tc.stack, line)
				}
			}
			if !found {
				t.Errorf("the dropped panic %q was not logged; the log:\n%s", tc.want, buf.String())
			}
		})
	}
}

// TestKeeperPanicDroppedAfterHandlerPanicIsLogged checks that a panic the
// lease keeper recovered on its timer (the store's Renew) while the
// handler ran, which a later panic goes on in place of (the handler's, the
// store's Complete, a hook's on the request's event, also the lease_lost
// event of a claim found superseded), is logged at the error level with
// its value and the stack where it was raised, as any panic the Middleware
// drops. It used to be dropped without a trace.
func TestKeeperPanicDroppedAfterHandlerPanicIsLogged(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"the handler panics", "handler bug"},
		{"Complete panics", "store bug"},
		{"a hook panics", "hook bug"},
		{"a hook panics on a superseded claim's event", "hook bug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const lease = 9 * time.Second
			clk := clock.NewManual(fakeStart)
			base := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
			var renewals atomic.Int64
			st := &faultyStore{Store: base, renew: func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
				if renewals.Add(1) == 1 {
					panic("renew broke")
				}
				return base.Renew(ctx, k, tok, l)
			}, complete: func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
				switch tc.name {
				case "a hook panics":
					return base.Complete(ctx, k, tok, resp, ttl)
				case "a hook panics on a superseded claim's event":
					return idempotency.ErrStaleToken
				}
				panic("store bug")
			}}
			var buf testkit.SyncBuffer
			entered, release := make(chan struct{}), make(chan struct{})
			opts := []idempotency.Option{idempotency.WithLease(lease), idempotency.WithClock(clk),
				idempotency.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil)))}
			if tc.want == "hook bug" {
				opts = append(opts, idempotency.WithHook(func(idempotency.Event) { panic("hook bug") }))
			}
			h := idempotency.Middleware(st, opts...)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				close(entered)
				<-release
				if tc.want == "handler bug" {
					panic("handler bug")
				}
				w.WriteHeader(http.StatusCreated)
			}))
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
			select {
			case p := <-panicked:
				if p != tc.want {
					t.Fatalf("the request went on with panic %v, want %q", p, tc.want)
				}
			case <-time.After(testenv.Patience):
				t.Fatal("the request never finished")
			}
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec struct{ Level, Panic, Stack string }
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Panic == "renew broke" {
					if rec.Level != "ERROR" || !strings.Contains(rec.Stack, "TestKeeperPanicDroppedAfterHandlerPanicIsLogged") {
						t.Errorf("the dropped panic was logged at %s with a stack without the Renew that raised it:\n%s", rec.Level, line)
					}
					return
				}
			}
			t.Errorf("the keeper's panic, dropped, was not logged; the log:\n%s", buf.String())
		})
	}
}
