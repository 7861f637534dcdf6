package headercodec

import (
	"hash/maphash"
	"net/http"
	"sync/atomic"
)

// Shared decodes encodings through a small table of the headers it
// decoded last, so that a caller that decodes the same few encodings over
// and over (a store replaying stored responses, whose handlers answer with
// a handful of header sets) gets one http.Header per encoding instead of a
// new map, value slices and strings each time. The headers it returns are
// shared between its callers: read-only. Create it with NewShared; the
// zero value is not usable. It is safe for concurrent use by multiple
// goroutines.
type Shared struct {
	seed  maphash.Seed
	slots [sharedSlots]atomic.Pointer[sharedHeader]
}

// sharedSlots is the number of encodings a Shared keeps; sharedMax the
// longest it keeps, so that a Shared holds at most about 16 KiB of them.
const (
	sharedSlots = 32
	sharedMax   = 512
)

// sharedHeader is an encoding and its header, never changed once stored.
type sharedHeader struct {
	enc string
	h   http.Header
}

// NewShared returns an empty Shared.
func NewShared() *Shared { return &Shared{seed: maphash.MakeSeed()} }

// Decode is the package's Decode, answered from the table when it holds
// b: the header returned must not be modified, nor its value slices. An
// encoding that does not decode is never kept.
func (s *Shared) Decode(b []byte) (http.Header, error) {
	if len(b) > sharedMax {
		return Decode(b)
	}
	slot := &s.slots[maphash.Bytes(s.seed, b)%sharedSlots]
	if c := slot.Load(); c != nil && c.enc == string(b) {
		return c.h, nil
	}
	if !IsEncoded(b) {
		return nil, ErrCorrupt
	}
	enc := string(b)
	h, err := DecodeString(enc)
	if err == nil {
		slot.Store(&sharedHeader{enc: enc, h: h})
	}
	return h, err
}
