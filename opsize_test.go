package saferetry

import (
	"testing"
	"unsafe"
)

// TestOperationSizeClass: the operation, the Transport's largest
// allocation per RoundTrip (it holds the first attempt's request, the
// connection trace and a generated key's text), stays in the 640-byte size
// class. The runtime puts an 8-byte header before an object of over 512
// bytes that holds pointers, so 632 bytes is the most that fits: 8 more
// would make every operation allocate 704.
func TestOperationSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(operation{}); n > 640-8 {
		t.Errorf("operation is %d bytes, want at most 632 (its size class, less the allocation's header)", n)
	}
}
