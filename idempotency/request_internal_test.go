package idempotency

import (
	"testing"
	"unsafe"
)

// TestRequestStateFitsOneSizeClass guards the fast path's allocation: a
// protected request's state is one allocation of at most 512 bytes (a Go
// size class); a field more spills it into the 576-byte class on every
// request.
func TestRequestStateFitsOneSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(request{}); n > 512 {
		t.Fatalf("request is %d bytes, over 512", n)
	}
}
