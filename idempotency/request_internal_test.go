package idempotency

import (
	"testing"
	"unsafe"
)

// TestRequestSizes guards the fast path's allocations. Every protected
// request allocates its state (request); one that runs its handler in
// lease mode also allocates its claim (leaseClaim), and a replay, a 409 or
// a 422 does not. Each fits a 256-byte Go size class: a field more spills
// it into the 288-byte class on every request.
func TestRequestSizes(t *testing.T) {
	for _, c := range []struct {
		name string
		size uintptr
	}{
		{"request", unsafe.Sizeof(request{})},
		{"leaseClaim", unsafe.Sizeof(leaseClaim{})},
	} {
		if c.size > 256 {
			t.Errorf("%s is %d bytes, over 256", c.name, c.size)
		}
	}
}
