package memstore

import (
	"net/http/httptest"
	"strings"
	"testing"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
)

// TestEntryAllocation: a new entry takes its fingerprint in its own
// allocation of 144 bytes when the fingerprint is 65 to 80 bytes long, as
// the Middleware's are, and the two take an allocation each otherwise;
// either way the entry's fingerprint is a copy, never the caller's bytes.
func TestEntryAllocation(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		if size := unsafe.Sizeof(entry{}); size != 64 {
			t.Errorf("an entry is %d bytes, want 64", size)
		}
		if size := unsafe.Sizeof(entryWithFingerprint{}); size != 144 {
			t.Errorf("an entry with its fingerprint is %d bytes, want 144 (a size class)", size)
		}
	}
	mw := idempotency.Fingerprint(httptest.NewRequest("POST", "/payments", nil), []byte(`{"amount":1}`))
	if n := len(mw); n <= fingerprintRoom-16 || n > fingerprintRoom {
		t.Errorf("the Middleware's fingerprint is %d bytes, which does not share its entry's allocation", n)
	}
	for _, n := range []int{0, 2, 64, 65, 67, 80, 81, 200} {
		// A slice of a larger string, as a caller's may be.
		fp := (strings.Repeat("f", n) + "tail")[:n]
		e := newEntry(fp)
		if e.fingerprint != fp || e.state != idempotency.StateInProgress || e.token != 0 || e.resp != nil {
			t.Fatalf("%d bytes: newEntry = %+v", n, *e)
		}
		shared := n > fingerprintRoom-16 && n <= fingerprintRoom
		if n > 0 {
			p, base := uintptr(unsafe.Pointer(unsafe.StringData(e.fingerprint))), uintptr(unsafe.Pointer(e))
			if p == uintptr(unsafe.Pointer(unsafe.StringData(fp))) {
				t.Errorf("%d bytes: the entry keeps the caller's fingerprint", n)
			}
			if inside := p >= base && p < base+unsafe.Sizeof(entryWithFingerprint{}); inside != shared {
				t.Errorf("%d bytes: fingerprint in the entry's allocation %v, want %v", n, inside, shared)
			}
		}
		want := 2.0
		if shared || n == 0 {
			want = 1
		}
		if got := testing.AllocsPerRun(100, func() { newEntry(fp) }); got != want {
			t.Errorf("%d bytes: newEntry allocates %v times, want %v", n, got, want)
		}
	}
}
