package retrypolicy

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// TestDecideStartsTheScheduleAfresh: a schedule configured the way
// backoff.Retry allows (made by NewExponentialBackOff, its fields set
// afterwards) starts at its own InitialInterval only once Reset; Retry
// resets it before the first wait, and so must the decision, or the first
// retry waits the default 500 ms whatever the caller set.
func TestDecideStartsTheScheduleAfresh(t *testing.T) {
	p := &Policy{NewBackoff: func() backoff.BackOff {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval = 20 * time.Millisecond
		b.RandomizationFactor = 0
		b.MaxElapsedTime = 0
		return b
	}}
	st := State{Attempt: 1, MaxAttempts: 3}
	v := p.Decide(failure(errReset), &st, func() time.Time { return t0 })
	if !v.Retry || v.Wait != 20*time.Millisecond {
		t.Fatalf("first retry: retry %v, wait %v; want a retry after the schedule's 20ms", v.Retry, v.Wait)
	}
}
