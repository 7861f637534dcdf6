package idempotency

import (
	"sync"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// keeperShards is how many keeperQueues a Middleware spreads its lease
// keepers over, so that requests on many cores seldom meet on one lock.
const keeperShards = 8

// The lanes of a keeperQueue.
const (
	laneRenew  = 1 // keepers waiting for their first renewal, in the order it is due
	laneSettle = 2 // settling keepers whose settle deadline comes first, in its order
)

// keeperQueue wakes lease keepers on one timer shared by many requests
// until each needs a timer of its own. A request that settles before its
// first renewal is due, as most do, then never starts a timer: it joins a
// lane when its claim is acquired and leaves it when it settles, and the
// shared timer is armed only when a keeper becomes the first to wake.
//
// A keeper's wake time is taken when it joins and does not change while it
// waits: it leaves and joins again when it must wake earlier. The times in
// a lane come nearly in order (the renewals are due a fixed interval after
// the claims were sent, the settle deadlines a fixed timeout after the
// handlers returned), so a keeper joins at or near the tail.
//
// When the timer fires, every keeper due is taken out of its lane and
// ticks in a goroutine of its own, as a timer of its own would have made it
// do; from then on it keeps its own timer (see leaseKeeper.arm). The
// queue's lock is taken after a keeper's lock, never before.
type keeperQueue struct {
	clk   clock.Clock
	epoch time.Time // wake times count from it

	mu      sync.Mutex
	lanes   [2]struct{ head, tail *leaseKeeper }
	timer   clock.Timer // made at the first join
	armed   bool
	armedAt int64 // the wake time the timer is set for
}

func (kq *keeperQueue) wakeOf(t time.Time) int64 { return int64(t.Sub(kq.epoch)) }

// now reads the clock as a wake time.
func (kq *keeperQueue) now() int64 { return int64(clock.Since(kq.clk, kq.epoch)) }

// join puts lk in lane, to wake at at; now is the time.
func (kq *keeperQueue) join(lk *leaseKeeper, lane uint8, at, now int64) {
	kq.mu.Lock()
	defer kq.mu.Unlock()
	kq.link(lk, lane, at)
	if !kq.armed || lk.wake < kq.armedAt {
		kq.arm(lk.wake, now)
	}
}

// move gives lk, if it is still waiting, the wake time at in lane (none
// when ok is false) and reports true; it reports false when lk is not
// waiting, having been woken.
func (kq *keeperQueue) move(lk *leaseKeeper, lane uint8, at int64, ok bool, now int64) bool {
	kq.mu.Lock()
	defer kq.mu.Unlock()
	if lk.lane == 0 {
		return false
	}
	if ok && at == lk.wake {
		return true
	}
	kq.unlink(lk)
	if ok {
		kq.link(lk, lane, at)
		if !kq.armed || at < kq.armedAt {
			kq.arm(at, now)
		}
	}
	return true
}

// leave takes lk out of its lane, if it is in one. The timer stays armed:
// when it fires with nobody due, it is set for the next keeper, if any.
func (kq *keeperQueue) leave(lk *leaseKeeper) {
	kq.mu.Lock()
	defer kq.mu.Unlock()
	if lk.lane != 0 {
		kq.unlink(lk)
	}
}

// fire wakes the keepers that are due and sets the timer for the next one.
func (kq *keeperQueue) fire() {
	kq.mu.Lock()
	now := kq.now()
	kq.armed = false
	var due *leaseKeeper // chained through next once out of their lanes
	for i := range kq.lanes {
		for lk := kq.lanes[i].head; lk != nil && lk.wake <= now; lk = kq.lanes[i].head {
			kq.unlink(lk)
			lk.next, due = due, lk
		}
	}
	var first *leaseKeeper
	for i := range kq.lanes {
		if h := kq.lanes[i].head; h != nil && (first == nil || h.wake < first.wake) {
			first = h
		}
	}
	if first != nil {
		kq.arm(first.wake, now)
	}
	kq.mu.Unlock()
	for due != nil {
		lk := due
		due, lk.next = lk.next, nil
		go lk.tick()
	}
}

// arm sets the timer for wake; now is the time, as a wake time. The lock
// must be held.
func (kq *keeperQueue) arm(wake, now int64) {
	d := max(clock.Between(now, wake), 0)
	if kq.timer == nil {
		kq.timer = kq.clk.AfterFunc(d, kq.fire)
	} else {
		kq.timer.Reset(d)
	}
	kq.armed, kq.armedAt = true, wake
}

// link puts lk in lane in the order of wake, walking from the tail. The lock
// must be held.
func (kq *keeperQueue) link(lk *leaseKeeper, lane uint8, wake int64) {
	l := &kq.lanes[lane-1]
	lk.lane, lk.wake = lane, wake
	after := l.tail
	for after != nil && after.wake > wake {
		after = after.prev
	}
	lk.prev = after
	if after == nil {
		lk.next, l.head = l.head, lk
	} else {
		lk.next, after.next = after.next, lk
	}
	if lk.next == nil {
		l.tail = lk
	} else {
		lk.next.prev = lk
	}
}

// unlink takes lk out of its lane. The lock must be held.
func (kq *keeperQueue) unlink(lk *leaseKeeper) {
	l := &kq.lanes[lk.lane-1]
	if lk.prev == nil {
		l.head = lk.next
	} else {
		lk.prev.next = lk.next
	}
	if lk.next == nil {
		l.tail = lk.prev
	} else {
		lk.next.prev = lk.prev
	}
	lk.prev, lk.next, lk.lane = nil, nil, 0
}
