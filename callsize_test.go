package saferetry

import (
	"testing"
	"unsafe"
)

// TestCallContextSizeClass: the context of a Client.Do call, its one
// allocation of its own (see TestClientOverheadAllocations), stays in the
// 112-byte size class: what it records of the last hop (its Reason
// among them) must not make every call allocate the next class up.
func TestCallContextSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(callContext{}); n > 112 {
		t.Errorf("callContext is %d bytes, want at most 112 (its size class)", n)
	}
}
