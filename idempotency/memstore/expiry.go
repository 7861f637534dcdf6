package memstore

import "github.com/saferetry/saferetry/idempotency"

// expiry is the time (as shard.offset gives it) at which the sweep looks
// at a key's entry again.
type expiry struct {
	at  int64
	key idempotency.Key
}

// expiryQueue holds a shard's expiries and gives them back soonest first.
// Most come in order: a shard's new keys under one ttl expire in the order
// they were claimed. Those go to run, a queue that takes them in chunks
// and never copies one; the rest (a shorter ttl than the keys before it)
// go to heap. The soonest of the two fronts comes out first.
type expiryQueue struct {
	run  expiryRun
	heap expiryHeap
}

func (q *expiryQueue) push(x expiry) {
	if last, ok := q.run.last(); !ok || x.at >= last {
		q.run.push(x)
		return
	}
	q.heap.push(x)
}

// due reports whether the soonest expiry is at or before at.
func (q *expiryQueue) due(at int64) bool {
	return (q.run.len() > 0 && q.run.front().at <= at) || (len(q.heap) > 0 && q.heap[0].at <= at)
}

// pop removes and returns the soonest expiry; the queue must not be empty.
func (q *expiryQueue) pop() expiry {
	if len(q.heap) == 0 || (q.run.len() > 0 && q.run.front().at <= q.heap[0].at) {
		return q.run.pop()
	}
	return q.heap.pop()
}

// runChunk is how many expiries a chunk of a run holds at most: 102 of
// 40 bytes fill a 4 KiB size class. The first chunk holds 8, each next
// one twice the one before, so that a shard with few keys takes little.
const (
	runChunk      = 102
	runFirstChunk = 8
)

// expiryRun is a first-in first-out queue of expiries in chunks. A chunk
// is written once and dropped when its last expiry is popped, so that a
// run of any length grows without copying what it holds, and gives memory
// back as it drains.
type expiryRun struct {
	chunks [][]expiry // each written up to its capacity before the next is made
	head   int        // the front's index in chunks[0]
	n      int        // how many expiries the run holds
}

func (r *expiryRun) len() int { return r.n }

func (r *expiryRun) front() expiry { return r.chunks[0][r.head] }

// last returns the time of the expiry pushed last, if the run holds any.
func (r *expiryRun) last() (int64, bool) {
	if r.n == 0 {
		return 0, false
	}
	c := r.chunks[len(r.chunks)-1]
	return c[len(c)-1].at, true
}

func (r *expiryRun) push(x expiry) {
	i := len(r.chunks) - 1
	if i < 0 || len(r.chunks[i]) == cap(r.chunks[i]) {
		size := runFirstChunk
		if i >= 0 {
			size = min(2*cap(r.chunks[i]), runChunk)
		}
		r.chunks = append(r.chunks, make([]expiry, 0, size))
		i++
	}
	r.chunks[i] = append(r.chunks[i], x)
	r.n++
}

// pop removes and returns the front; the run must not be empty.
func (r *expiryRun) pop() expiry {
	c := r.chunks[0]
	x := c[r.head]
	c[r.head] = expiry{} // drop the key's strings for the collector
	r.head++
	r.n--
	if r.head == len(c) {
		r.head = 0
		if len(r.chunks) == 1 {
			r.chunks[0] = c[:0] // the run is empty: its chunk is reused
		} else {
			r.chunks[0] = nil
			r.chunks = r.chunks[1:]
		}
	}
	return x
}

// expiryHeap is a binary min-heap of expiries ordered by time. It is written
// out rather than built on container/heap so that a push allocates nothing
// beyond the slice's growth.
type expiryHeap []expiry

func (h *expiryHeap) push(x expiry) {
	*h = append(*h, x)
	a := *h
	for i := len(a) - 1; i > 0; {
		parent := (i - 1) / 2
		if a[i].at >= a[parent].at {
			break
		}
		a[i], a[parent] = a[parent], a[i]
		i = parent
	}
}

// pop removes and returns the soonest expiry; the heap must not be empty.
func (h *expiryHeap) pop() expiry {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a[last] = expiry{} // drop the key's strings for the collector
	a = a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a[l].at < a[m].at {
			m = l
		}
		if r < len(a) && a[r].at < a[m].at {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
