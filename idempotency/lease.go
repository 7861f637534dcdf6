package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// leaseKeeper renews a claim's lease every interval while the handler runs.
// It runs on a timer rather than a goroutine of its own, so a handler that
// finishes within one interval costs no renewal at all.
type leaseKeeper struct {
	m     *middleware
	base  context.Context // detached from the request's cancellation
	key   Key
	token int64

	mu       sync.Mutex // held for a whole renewal, so stop waits for it
	timer    *time.Timer
	interval time.Duration
	stopped  bool
	lost     bool
}

func (m *middleware) keepLease(base context.Context, k Key, token int64) *leaseKeeper {
	lk := &leaseKeeper{m: m, base: base, key: k, token: token, interval: max(m.cfg.lease/3, time.Millisecond)}
	lk.mu.Lock() // renew reads lk.timer
	lk.timer = time.AfterFunc(lk.interval, lk.renew)
	lk.mu.Unlock()
	return lk
}

func (lk *leaseKeeper) renew() {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.stopped || lk.lost {
		return
	}
	ctx, cancel := context.WithTimeout(lk.base, min(lk.interval, lk.m.cfg.storeTimeout))
	err := lk.m.store.Renew(ctx, lk.key, lk.token, lk.m.cfg.lease)
	cancel()
	switch {
	case errors.Is(err, ErrStaleToken):
		lk.lost = true
		lk.m.leaseLost(lk.base, lk.key, lk.token, 0, err)
		return
	case err != nil:
		// The lease may still be alive; try again at the next tick and let
		// the completion's token check settle who won.
		lk.m.cfg.logger.LogAttrs(lk.base, slog.LevelWarn, "idempotency: lease renewal failed",
			slog.String("scope", lk.key.Scope), slog.String("key", lk.key.Key),
			slog.Int64("token", lk.token), slog.Any("error", err))
	}
	lk.timer.Reset(lk.interval)
}

// stop ends renewals, waiting for one in flight, and reports whether the
// lease was found lost.
func (lk *leaseKeeper) stop() (lost bool) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.stopped = true
	lk.timer.Stop()
	return lk.lost
}
