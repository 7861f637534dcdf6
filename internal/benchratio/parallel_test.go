package benchratio

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestParallelRunsEachOperationOnceAtOnce(t *testing.T) {
	var ran, inFlight, most atomic.Int64
	release := make(chan struct{})
	op := Parallel(t, 8, func() error {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if ran.Add(1) == 8 {
			close(release) // all eight goroutines are in an operation
		}
		<-release
		inFlight.Add(-1)
		return nil
	})
	op(100)
	if ran.Load() != 100 || most.Load() != 8 {
		t.Errorf("ran %d operations, at most %d at once; want 100 and 8", ran.Load(), most.Load())
	}
}

func TestParallelReportsTheFirstError(t *testing.T) {
	ft := &fakeTB{TB: t}
	var ran atomic.Int64
	Parallel(ft, 4, func() error { ran.Add(1); return errors.New("boom") })(100)
	if ft.errors.Load() != 1 || ran.Load() != 4 {
		t.Errorf("%d errors reported after %d operations; want 1 after 4 (each goroutine stops at its error)", ft.errors.Load(), ran.Load())
	}
}

// fakeTB counts the errors reported to it instead of failing.
type fakeTB struct {
	testing.TB
	errors atomic.Int64
}

func (f *fakeTB) Error(...any) { f.errors.Add(1) }
