package saferetry

import (
	"testing"
	"unsafe"
)

// TestCallContextSizeClass: the context of a Client.Do call, its one
// allocation of its own (see TestClientOverheadAllocations), which holds
// the request Do hands net/http, stays in the 416-byte size class: what
// it records of the last hop (its Reason among them) must not make every
// call allocate the next class up.
func TestCallContextSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(callContext{}); n > 416 {
		t.Errorf("callContext is %d bytes, want at most 416 (its size class)", n)
	}
}
