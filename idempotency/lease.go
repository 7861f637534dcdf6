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
// finishes within one interval costs no renewal at all. Once the handler
// returns, the same timer bounds the store calls that record the outcome
// (see finish), which saves a second timer per request.
type leaseKeeper struct {
	m     *middleware
	base  context.Context // detached from the request's cancellation
	key   Key
	token int64

	mu       sync.Mutex // held for a whole renewal, so stop waits for it
	timer    *time.Timer
	interval time.Duration
	expires  time.Time // the lease lasts at least until then
	stopped  bool
	lost     bool

	finishing bool
	deadline  time.Time
	cancel    context.CancelFunc
}

// start begins renewals of the claim (k, token), which was asked for at
// claimed.
func (lk *leaseKeeper) start(m *middleware, base context.Context, k Key, token int64, claimed time.Time) {
	lk.mu.Lock() // renew reads lk.timer
	lk.m, lk.base, lk.key, lk.token = m, base, k, token
	lk.interval = max(m.cfg.lease/3, time.Millisecond)
	lk.expires = claimed.Add(m.cfg.lease)
	lk.timer = time.AfterFunc(lk.interval, lk.renew)
	lk.mu.Unlock()
}

func (lk *leaseKeeper) renew() {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.stopped {
		return
	}
	if lk.finishing {
		// A tick that fired before finish re-armed the timer comes here
		// early; only the deadline's own tick cancels.
		if !time.Now().Before(lk.deadline) {
			lk.cancel()
		}
		return
	}
	if lk.lost {
		return
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(lk.base, min(lk.interval, lk.m.cfg.storeTimeout))
	err := lk.m.store.Renew(ctx, lk.key, lk.token, lk.m.cfg.lease)
	cancel()
	switch {
	case err == nil:
		// The store counts the lease from when it got the call, which is
		// no earlier than sent.
		lk.expires = sent.Add(lk.m.cfg.lease)
		lk.timer.Reset(lk.interval)
	case errors.Is(err, ErrStaleToken):
		lk.lost = true
		lk.m.leaseLost(lk.base, lk.key, lk.token, 0, err)
	default:
		// The lease may still be alive: try again soon enough to renew it
		// before it lapses, and let the completion's token check settle who
		// won if it does lapse.
		lk.m.cfg.logger.LogAttrs(lk.base, slog.LevelWarn, "idempotency: lease renewal failed",
			slog.String("scope", lk.key.Scope), slog.String("key", lk.key.Key),
			slog.Int64("token", lk.token), slog.Any("error", err))
		lk.timer.Reset(retryDelay(lk.interval, time.Until(lk.expires)))
	}
}

// retryDelay is the wait before retrying a failed renewal when the lease has
// left to run: a third of what is left, so that several tries fit before it
// lapses, but no longer than the renewal interval and no shorter than a
// tenth of it (a store that fails at once is not hammered). Once the lease
// may have lapsed, renewals go on at the interval: a Renew still succeeds
// as long as nobody took the claim over.
func retryDelay(interval, left time.Duration) time.Duration {
	if left <= 0 {
		return interval
	}
	return min(interval, max(left/3, interval/10))
}

// finish ends renewals, waiting for one in flight, and re-arms the timer to
// call cancel after timeout: the bound of the store calls that follow. It
// reports whether the lease was found lost. Call stop when those calls are
// done.
func (lk *leaseKeeper) finish(timeout time.Duration, cancel context.CancelFunc) (lost bool) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.finishing = true
	lk.cancel = cancel
	lk.deadline = time.Now().Add(timeout)
	lk.timer.Reset(timeout)
	return lk.lost
}

// stop ends the timer for good.
func (lk *leaseKeeper) stop() {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.stopped = true
	lk.timer.Stop()
}
