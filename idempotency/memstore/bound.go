package memstore

import (
	"sync/atomic"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
)

// The heap an entry costs beyond the bytes of its strings and its response,
// as the store charges it against the byte bound. Measured with go1.26 on
// amd64: N entries were claimed and completed with a status only (N from
// 5,000 to 1.2 million in steps of 15%), with 17-byte keys allocated
// before, into a store with no sweep, and the live heap (runtime.GC, then
// runtime.MemStats.HeapAlloc) grew by 224 to 278 bytes per entry. Less the
// response's 64, that is 160 to 214 bytes of map slot, entry struct and
// expiry queue item. The spread is the map's slots, which run from 7/16
// to 7/8 full, so the share of an entry depends on N; the constants take
// the upper end. A claim in progress is charged more than it holds (about
// 370 bytes for 200), because of its reserve. TestHeapWithinBound keeps
// the constants honest.
const (
	// entryOverhead is an entry's slot in its shard's map (a Key and a
	// pointer, 40 bytes, at the map's load factor) and the entry struct
	// (64 bytes).
	entryOverhead = 160
	// expiryOverhead is one item of a shard's expiry queue (a time and a
	// Key, 40 bytes), with the part of a chunk not yet written.
	expiryOverhead = 56
	// responseOverhead is the response struct of a completed entry (48
	// bytes, counted as a 64-byte size class) and the size-class rounding
	// of the byte slice it holds.
	responseOverhead = 80
	// viewOverhead is a replayed response's view, an idempotency.Response
	// (48 bytes), and mapOverhead its http.Header's map without its slots.
	viewOverhead = 48
	mapOverhead  = 48
	// viewRounding is the size-class rounding of the string and the array
	// of values of a view's header.
	viewRounding = 32
	// mapGroupSize is one group of a map's slots: 8 control bytes and 8
	// slots of a string and a []string (40 bytes each).
	mapGroupSize = 8 + 8*40

	// The exact size of a string's header.
	stringSize = int64(unsafe.Sizeof(""))
)

// size is what e costs, the expiry queue aside: its map slot and struct, its
// fingerprint, and its response or, while in progress, the reserve that
// lets it complete as not replayable. The key's bytes are counted with the
// queue items, which hold them too and may outlive the entry.
func (e *entry) size(k idempotency.Key) int64 {
	n := entryOverhead + int64(len(e.fingerprint))
	if e.resp == nil {
		return n + reserveSize(k)
	}
	return n + e.resp.size()
}

// itemSize is what one expiry queue item of k costs, key included.
func itemSize(k idempotency.Key) int64 {
	return expiryOverhead + int64(len(k.Scope)+len(k.Key))
}

// reserveSize is what a claim sets aside for its completion: a response
// with neither header nor body (the not-replayable marker) and one heap
// item, in case the completion's ttl ends before the claim's.
func reserveSize(k idempotency.Key) int64 {
	return responseOverhead + itemSize(k)
}

// size is what r costs: its struct and its bytes, body and header; and its
// view, once made. Packed with its bytes, the struct takes its own size
// where apart it takes a 64-byte class (see allocResponse).
func (r *response) size() int64 {
	n := responseOverhead + int64(cap(r.data))
	if r.packed {
		n -= 64 - int64(responseSize)
	}
	if r.view != nil {
		n += r.viewSize()
	}
	return n
}

// viewSize is what r's view costs: the Response and, with a header, a map
// of r.fields names at the map's load factor (7 of every 8 slots), with
// room for a directory once it needs more than one group, the array of its
// values and the string its names and values share (at most the length of
// the header's bytes).
func (r *response) viewSize() int64 {
	n := int64(viewOverhead)
	if r.fields < 0 {
		return n
	}
	groups := int64(1)
	for groups*7 < int64(r.fields) {
		groups *= 2
	}
	if groups > 1 {
		n += 64
	}
	return n + mapOverhead + groups*mapGroupSize + viewRounding + stringSize*int64(r.valueCount()) + int64(len(r.data)-int(r.bodyLen))
}

// budget counts the entries and the estimated bytes of a Store against its
// bounds. Counts move by compare-and-swap, never past a bound, so they stay
// exact however many goroutines claim at once.
type budget struct {
	entries, bytes       atomic.Int64
	maxEntries, maxBytes int64
}

// take adds entries and bytes to the counts and reports true, or, when
// either would pass its bound, changes nothing and reports false. Negative
// bytes (a completion smaller than its reserve) always fit.
func (b *budget) take(entries, bytes int64) bool {
	if entries > 0 && !takeUpTo(&b.entries, entries, b.maxEntries) {
		return false
	}
	if !takeUpTo(&b.bytes, bytes, b.maxBytes) {
		if entries > 0 {
			b.entries.Add(-entries)
		}
		return false
	}
	return true
}

// give takes entries and bytes off the counts.
func (b *budget) give(entries, bytes int64) {
	if entries != 0 {
		b.entries.Add(-entries)
	}
	b.bytes.Add(-bytes)
}

// takeUpTo adds n to c unless the sum would pass limit.
func takeUpTo(c *atomic.Int64, n, limit int64) bool {
	if n <= 0 {
		c.Add(n)
		return true
	}
	for {
		cur := c.Load()
		if n > limit-cur {
			return false
		}
		if c.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}
