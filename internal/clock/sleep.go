package clock

import (
	"context"
	"time"
)

// Sleep waits for d on c, returning early with ctx's error when ctx is done
// first; it returns nil once d has passed. A d that is not positive waits
// nothing and returns ctx's error, if any.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
