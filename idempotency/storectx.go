package idempotency

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// storeCtx is the context of the store calls and logs of a claim once its
// handler returned (see leaseClaim): the request's values without its
// cancellation or deadline, cancelled (context.Canceled) by the keeper at
// the settle deadline (see leaseKeeper.settle) and when the claim ends. It
// stands for context.WithCancel(context.WithoutCancel(parent)) and makes
// these, three allocations, only once asked for its values or its Done
// channel: a store that reads only Err, as memstore does, costs none.
// Contexts derived from it derive from the one it made, so that deriving
// starts no goroutine (its Value gives that one's, which the context
// package finds its Done channel by).
type storeCtx struct {
	parent    context.Context // the request's
	mu        sync.Mutex
	cancelled bool
	made      context.Context // made at the first Done or Value
	cancel    context.CancelFunc
}

// ctx returns the context c stands for, made at the first call.
func (c *storeCtx) ctx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made == nil {
		c.made, c.cancel = context.WithCancel(context.WithoutCancel(c.parent))
		if c.cancelled {
			c.cancel()
		}
	}
	return c.made
}

// Deadline reports none: the request's does not bound the store calls.
func (c *storeCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done is the Done channel of the context c stands for.
func (c *storeCtx) Done() <-chan struct{} { return c.ctx().Done() }

// Err is context.Canceled once c is cancelled, nil before.
func (c *storeCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return context.Canceled
	}
	return nil
}

// Value is the value of the context c stands for.
func (c *storeCtx) Value(key any) any { return c.ctx().Value(key) }

// String is that of the context c stands for, which it makes if need be:
// fmt would otherwise print c's fields, racing with end.
func (c *storeCtx) String() string { return c.ctx().(fmt.Stringer).String() }

// end cancels c, and the context it made, if any.
func (c *storeCtx) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return
	}
	c.cancelled = true
	if c.cancel != nil {
		c.cancel()
	}
}
