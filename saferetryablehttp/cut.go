package saferetryablehttp

import (
	"errors"
	"net/url"
	"runtime"
	"sync"
	"weak"
)

// cutAttempts leads from the error that net/http made of an attempt that
// HTTPClient.Timeout cut back to its request's state. net/http replaces
// the attempt's error (an attemptError, which names the request) by one
// of its own, and that error, or one that wraps it (Configure's
// CheckRetry's), is all that ErrorHandler gets when a CheckRetry of the
// caller's around Configure's stops the retry, whose cost must go back
// then (see errorHandler). A link lasts as long as its error: the retry
// may be made, or stopped where nothing is seen (see Configure), and the
// request's state is then let go of with the error.
type cutAttempts struct {
	mu sync.Mutex
	m  map[weak.Pointer[url.Error]]*rhOp
}

// link leads err, net/http's error of st's last attempt, to st; an err
// that is not net/http's is left out.
func (c *cutAttempts) link(err error, st *rhOp) {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return
	}
	k := weak.Make(ue)
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[weak.Pointer[url.Error]]*rhOp)
	}
	c.m[k] = st
	c.mu.Unlock()
	runtime.AddCleanup(ue, c.forget, k)
}

// take returns the state of the request that err, or the error it wraps,
// was linked to, and forgets the link; nil if there is none.
func (c *cutAttempts) take(err error) *rhOp {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return nil
	}
	k := weak.Make(ue)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.m[k]
	delete(c.m, k)
	return st
}

func (c *cutAttempts) forget(k weak.Pointer[url.Error]) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
