package idempotency_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestNonStorePanicWhileRecordingIsNotAStoreError checks that a panic
// while a request's outcome is recorded that is not the store's (here the
// Middleware's logger, on a store call that failed without panicking) is
// not reported as OutcomeStoreError, which sends whoever reads the metrics
// to a store that is sound: it is reported as a handler's panic is,
// OutcomeReleased with no status (nothing was sent), in lease mode and in
// transactional mode alike.
func TestNonStorePanicWhileRecordingIsNotAStoreError(t *testing.T) {
	transient := errors.New("connection reset")
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) idempotency.Store
	}{
		{"lease mode, Complete failed and is retried", func(t *testing.T) idempotency.Store {
			failed := false
			base := newStore(t)
			return &faultyStore{Store: base, complete: func(ctx context.Context, k idempotency.Key, tok int64, r idempotency.Response, ttl time.Duration) error {
				if !failed {
					failed = true
					return transient
				}
				return base.Complete(ctx, k, tok, r, ttl)
			}}
		}},
		{"lease mode, response not storable", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
				return idempotency.ErrResponseNotStorable
			}}
		}},
		{"transactional mode, response not storable", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), completeErr: idempotency.ErrResponseNotStorable}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			h := idempotency.Middleware(tc.store(t), idempotency.WithHook(ev.hook),
				idempotency.WithLogger(slog.New(panickingLog{})))(&counter{})
			var p any
			func() {
				defer func() { p = recover() }()
				post(h, "k", `{}`)
			}()
			if s, _ := p.(string); !strings.HasPrefix(s, "log handler broke on: ") {
				t.Fatalf("the request went on with panic %v, want the logger's", p)
			}
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if len(ev.got) != 1 {
				t.Fatalf("%d events %v, want 1", len(ev.got), ev.got)
			}
			e := ev.got[0]
			if e.Outcome != idempotency.OutcomeReleased || e.Status != 0 || e.Err == nil {
				t.Errorf("event %s status %d err %v, want %s, no status, an error", e.Outcome, e.Status, e.Err, idempotency.OutcomeReleased)
			}
		})
	}
}
