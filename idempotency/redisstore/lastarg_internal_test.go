package redisstore

import (
	"strconv"
	"testing"
)

// TestLastArg: box gives a number's decimal, and the same number again
// without an allocation; another number replaces it.
func TestLastArg(t *testing.T) {
	var l lastArg
	for _, n := range []int64{60000, 60000, 10000000, 0, 60000} {
		if got := l.box(n); got != any(strconv.FormatInt(n, 10)) {
			t.Fatalf("box(%d) = %#v", n, got)
		}
		if allocs := testing.AllocsPerRun(10, func() { _ = l.box(n) }); allocs != 0 {
			t.Errorf("box(%d) again: %v allocations, want 0", n, allocs)
		}
	}
}
