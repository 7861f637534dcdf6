package saferetry

import (
	"context"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// sleep waits for d on clk, returning early with ctx's error when ctx is
// done first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
