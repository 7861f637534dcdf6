package benchratio

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Parallel returns an operation for Run that performs op n times from c
// goroutines at once, as c concurrent clients would: each takes the next of
// the n operations until none is left. The first error op returns fails tb
// (with tb.Error) and stops that goroutine. For Run to measure c clients,
// each round needs several operations per goroutine: give a -benchtime of
// at least 3 × Rounds × c operations (12288x for 64 goroutines).
func Parallel(tb testing.TB, c int, op func() error) func(n int) {
	return func(n int) {
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(n))
		var failed atomic.Bool
		for range c {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := op(); err != nil {
						if failed.CompareAndSwap(false, true) {
							tb.Error(err)
						}
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
