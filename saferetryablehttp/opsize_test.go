package saferetryablehttp

import (
	"testing"
	"unsafe"
)

// TestRequestStateSizeClass: rhOp, the one allocation the adapter makes
// for every request (see beforeAttempt), stays in the 208-byte size
// class: 8 more bytes would make every request allocate 224.
func TestRequestStateSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(rhOp{}); n > 208 {
		t.Errorf("rhOp is %d bytes, want at most 208 (its size class)", n)
	}
}
