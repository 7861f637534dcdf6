package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
)

// panickingLog is a slog.Handler that panics on every record, as a broken
// handler of the application's would.
type panickingLog struct{}

func (panickingLog) Enabled(context.Context, slog.Level) bool { return true }
func (panickingLog) Handle(_ context.Context, r slog.Record) error {
	panic("log handler broke on: " + r.Message)
}
func (h panickingLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panickingLog) WithGroup(string) slog.Handler      { return h }

// TestKeeperSurvivesPanickingUserCode: the lease keeper runs on timers,
// in goroutines of its own, where it calls the application's logger (a
// renewal failed, a lease could not be confirmed) and the store's Renew.
// A panic there neither takes the process down nor stops the keeper: it
// goes on renewing (or cancels the handler when the lease could lapse),
// the outcome is recorded, and the panic goes on in the request's own
// goroutine once the outcome is recorded, where a panic of its own logger
// or hook would: net/http's recovery, or the application's, sees it, and
// the retry is replayed.
func TestKeeperSurvivesPanickingUserCode(t *testing.T) {
	const lease = 9 * time.Second
	for _, tt := range []struct {
		name   string
		logger *slog.Logger
		renew  func(n int64) error // the nth renewal, from 1
		want   string              // in the panic the request goes on with
		lapses bool                // renewals never answer: the lease could lapse
	}{
		{name: "logger, renewal failed", logger: slog.New(panickingLog{}), want: "log handler broke on: idempotency: lease renewal failed",
			renew: func(n int64) error {
				if n == 1 {
					return errors.New("store hiccup")
				}
				return nil
			}},
		{name: "logger, lease unconfirmed", logger: slog.New(panickingLog{}), lapses: true,
			want: "log handler broke on: idempotency: no lease renewal was acknowledged in time"},
		{name: "store's Renew", want: "renew broke",
			renew: func(n int64) error {
				if n == 1 {
					panic("renew broke")
				}
				return nil
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewManual(fakeStart)
			base := newStore(t, memstore.WithClock(clk.Now), memstore.WithCleanupInterval(0))
			var renewals atomic.Int64
			hang := make(chan struct{})
			defer close(hang)
			st := &faultyStore{Store: base, renew: func(ctx context.Context, k idempotency.Key, tok int64, l time.Duration) error {
				n := renewals.Add(1)
				if tt.lapses {
					<-hang
					return errors.New("no answer")
				}
				if err := tt.renew(n); err != nil {
					return err
				}
				return base.Renew(ctx, k, tok, l)
			}}
			var calls atomic.Int64
			entered, release := make(chan struct{}), make(chan struct{})
			var cause error
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					close(entered)
				}
				select {
				case <-release:
					w.WriteHeader(http.StatusCreated)
				case <-r.Context().Done():
					cause = context.Cause(r.Context())
					w.WriteHeader(http.StatusConflict) // stored: the retry must replay it
				}
			})
			opts := []idempotency.Option{idempotency.WithLease(lease), idempotency.WithClock(clk)}
			if tt.logger != nil {
				opts = append(opts, idempotency.WithLogger(tt.logger))
			}
			h := idempotency.Middleware(st, opts...)(app)
			panicked := make(chan any, 1)
			go func() {
				defer func() { panicked <- recover() }()
				post(h, "k", `{}`)
			}()
			<-entered
			// Three leases of fake time: renewals go on after the panic;
			// or one, which the lease cannot outlive unconfirmed.
			steps := 9
			if tt.lapses {
				steps = 3
			}
			for i := range steps {
				testenv.Eventually(t, "the lease keeper's timer is armed", func() bool { return clk.Pending() > 0 })
				clk.Advance(lease / 3)
				if !tt.lapses {
					testenv.Eventually(t, fmt.Sprintf("renewal %d", i+1), func() bool { return renewals.Load() >= int64(i+1) })
				}
			}
			if !tt.lapses {
				if calls.Load() != 1 {
					t.Fatalf("%d executions while the first held the key", calls.Load())
				}
				wantProblem(t, post(h, "k", `{}`), http.StatusConflict, idempotency.ProblemInProgress)
				close(release)
			}
			var p any
			select {
			case p = <-panicked:
			case <-time.After(testenv.Patience):
				t.Fatal("the request never finished")
			}
			if got := fmt.Sprint(p); !strings.Contains(got, tt.want) {
				t.Errorf("the request went on with panic %q, want one with %q", got, tt.want)
			}
			if tt.lapses && !errors.Is(cause, idempotency.ErrLeaseLost) {
				t.Errorf("the handler's context ended with %v, want ErrLeaseLost", cause)
			}
			again := post(h, "k", `{}`)
			if again.Header().Get(idempotency.HeaderReplayed) != "true" || calls.Load() != 1 {
				t.Errorf("retry: %d %s after %d executions; want the recorded outcome replayed", again.Code, again.Body, calls.Load())
			}
		})
	}
}
