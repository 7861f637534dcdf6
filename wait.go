package saferetry

import (
	"context"
	"math/rand/v2"
	"time"
)

// clock is the seam through which the Transport reads time and waits, so
// that tests can run retry schedules on fake time.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) timer
}

// timer is the part of *time.Timer the Transport uses.
type timer interface {
	C() <-chan time.Time
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// sleep waits for d on clk, returning early with ctx's error when ctx is
// done first.
func sleep(ctx context.Context, clk clock, d time.Duration) error {
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

// passesDeadline reports whether a wait of d starting now would end at or
// after ctx's deadline, leaving no time for the next attempt.
func passesDeadline(ctx context.Context, now time.Time, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && !now.Add(d).Before(dl)
}

// jitter returns a uniform random number in [0, n); it is the only source
// of randomness for Retry-After jitter.
func jitter(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return rand.Int64N(n)
}
