package idempotency

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// keeperPanic is a panic of the application's code that a lease keeper
// called on its timer, in a goroutine of its own where nothing would
// recover it (the logger, or the store's Renew): the keeper recovers it
// and goes on keeping the lease, and the request goes on panicking with it
// once its outcome is recorded and reported (see leaseClaim.finish), as it
// would with a panic of its logger or a hook on its own goroutine.
// Whatever recovers the request's panics (net/http's, or the application's
// recovery handler) then sees it, with the stack where it was raised.
type keeperPanic struct {
	value any
	stack []byte
}

func (p *keeperPanic) Error() string {
	return fmt.Sprintf("idempotency: the lease keeper recovered a panic: %v\n\n%s", p.value, p.stack)
}

// Unwrap returns the value panicked with, if it is an error.
func (p *keeperPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// keep keeps p for the request, unless a panic is kept already (the first
// tells most). The lock must be held.
func (lk *leaseKeeper) keep(p any) {
	if lk.panicked || lk.stopped {
		return
	}
	lk.panicked = true
	lk.q.m.keeperPanics.Store(lk, &keeperPanic{value: p, stack: debug.Stack()})
}

// kept returns the panic kept for the request, if any, and forgets it. The
// lock must be held, and the keeper stopped: nothing is kept after that.
func (lk *leaseKeeper) kept() *keeperPanic {
	if !lk.panicked {
		return nil
	}
	p, _ := lk.q.m.keeperPanics.LoadAndDelete(lk)
	kp, _ := p.(*keeperPanic) // nil when already taken
	return kp
}

// warn logs msg on the keeper's timer; a panic of the logger is kept. The
// lock must be held.
func (lk *leaseKeeper) warn(msg string, attrs ...slog.Attr) {
	defer func() {
		if p := recover(); p != nil {
			lk.keep(p)
		}
	}()
	lk.q.m.cfg.logger.LogAttrs(lk.detached(), slog.LevelWarn, msg, attrs...)
}

// renew sends a renewal. A panic of the store's Renew is kept and taken
// for a failed renewal, so that the keeper tries again; after the keeper
// stopped, when no request is there to go on with it, it is logged.
func (lk *leaseKeeper) renew(ctx context.Context) (err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		err = fmt.Errorf("idempotency: Store.Renew panicked: %v", p)
		lk.mu.Lock()
		defer lk.mu.Unlock()
		if lk.stopped {
			lk.warn("idempotency: Store.Renew panicked after the outcome was recorded", slog.Any("error", err))
		}
		lk.keep(p)
	}()
	return lk.q.m.store.Renew(ctx, lk.q.claim.key, lk.q.claim.token, lk.q.m.cfg.lease)
}
