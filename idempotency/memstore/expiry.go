package memstore

import "github.com/saferetry/saferetry/idempotency"

// expiry is the time (as shard.offset gives it) at which the sweep looks
// at a key's entry again.
type expiry struct {
	at  int64
	key idempotency.Key
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
