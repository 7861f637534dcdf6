package idempotency

import (
	"context"
	"log/slog"
	"time"
)

// Poll intervals of WithWaitForResult. Without a Watcher a waiter polls
// from waitPollFirst, doubling up to waitPollMax; with one it is woken by
// the store and polls every waitPollWatched only as a fallback (or when the
// holder's lease is due to lapse, which nobody announces).
const (
	waitPollFirst   = 10 * time.Millisecond
	waitPollMax     = 200 * time.Millisecond
	waitPollWatched = time.Second
)

// waiter paces one request's wait for an entry in progress to settle. It
// holds one of the Middleware's waiting slots from its first pause until
// done.
type waiter struct {
	deadline time.Time
	next     time.Duration
	slot     bool
	settled  <-chan struct{} // from the store's Watcher; nil when polling
	stop     func()
}

// waiter returns the request's waiter, made at its first wait: most
// requests never wait.
func (q *request) waiter() *waiter {
	if q.wait == nil {
		q.wait = new(waiter)
	}
	return q.wait
}

// pause waits before the caller claims k again, which it should when pause
// returns true. It returns false, without waiting, once the total wait is
// used up, when ctx is done, or when the Middleware already has
// WithMaxWaiters requests waiting. e is the entry in the way.
func (wt *waiter) pause(ctx context.Context, m *middleware, k Key, e Entry) bool {
	now := m.cfg.clock.Now()
	if wt.deadline.IsZero() {
		if m.waiters.Add(1) > int64(m.cfg.maxWaiters) {
			m.waiters.Add(-1)
			return false
		}
		wt.slot = true
		wt.deadline = now.Add(m.cfg.wait)
		wt.next = waitPollFirst
		if wt.watch(ctx, m, k) {
			// The entry may have settled before the watch began: look
			// again at once, then wait for the store to say so.
			return true
		}
	}
	left := wt.deadline.Sub(now)
	if left <= 0 || ctx.Err() != nil {
		return false
	}
	var d time.Duration
	if wt.settled != nil {
		d = min(waitPollWatched, max(e.LeaseRemaining, waitPollFirst))
	} else {
		d = wt.next
		wt.next = min(2*wt.next, waitPollMax)
	}
	t := m.cfg.clock.NewTimer(min(d, left))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-wt.settled: // a nil channel never fires
		// A settlement fires once: watch again before looking, so that
		// the next one is not missed if the entry is still in progress.
		wt.stopWatch()
		wt.watch(ctx, m, k)
		return true
	case <-ctx.Done():
		return false
	}
}

// watch starts watching k when the store can notify; it reports whether it
// did.
func (wt *waiter) watch(ctx context.Context, m *middleware, k Key) bool {
	if m.watcher == nil {
		return false
	}
	// Setting up the watch is part of the wait, and bounded by it.
	wctx, cancel := context.WithTimeout(ctx, wt.deadline.Sub(m.cfg.clock.Now()))
	defer cancel()
	settled, stop, err := m.watcher.Watch(wctx, k)
	if err != nil {
		if wctx.Err() != nil {
			return false // the wait is over, or the client left
		}
		m.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the store cannot watch the key; polling",
			slog.String("scope", k.Scope), slog.String("key", k.Key), slog.Any("error", err))
		return false
	}
	wt.settled, wt.stop = settled, stop
	return true
}

// stopWatch ends the watch, if any. The watch is let go of before its
// stop runs, so that a stop that panics is never called again.
func (wt *waiter) stopWatch() {
	stop := wt.stop
	wt.settled, wt.stop = nil, nil
	if stop != nil {
		stop()
	}
}

// done ends the waiter's watch and gives back its slot, also when the
// stop panics (the store's): the slot is not kept for good.
func (wt *waiter) done(m *middleware) {
	defer func() {
		if wt.slot {
			m.waiters.Add(-1)
			wt.slot = false
		}
	}()
	wt.stopWatch()
}
