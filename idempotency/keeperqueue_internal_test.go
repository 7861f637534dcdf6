package idempotency

import (
	"slices"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// TestKeeperQueueOrder: keepers join a lane in any order and wait there in
// the order of their wake times (equal ones in the order they joined);
// moving and leaving keep the links whole.
func TestKeeperQueueOrder(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	kq := &keeperQueue{clk: clock.NewManual(start), epoch: start}
	ks := make([]leaseKeeper, 6)
	for i, at := range []int{5, 3, 9, 3, 1, 7} {
		kq.join(&ks[i], laneRenew, int64(time.Duration(at)*time.Second), 0)
	}
	lane := func(n uint8) []int {
		var got []int
		l := kq.lanes[n-1]
		var prev *leaseKeeper
		for lk := l.head; lk != nil; prev, lk = lk, lk.next {
			if lk.prev != prev || lk.lane != n {
				t.Fatalf("broken links at keeper %d", lk.wake)
			}
			got = append(got, int(time.Duration(lk.wake)/time.Second))
		}
		if l.tail != prev {
			t.Fatal("tail is not the last keeper")
		}
		return got
	}
	if got := lane(laneRenew); !slices.Equal(got, []int{1, 3, 3, 5, 7, 9}) {
		t.Fatalf("lane = %v; want wake times in order", got)
	}
	if kq.lanes[0].head.next != &ks[1] || kq.lanes[0].head.next.next != &ks[3] {
		t.Error("equal wake times are not in the order they joined")
	}
	if !kq.armed || kq.armedAt != int64(time.Second) {
		t.Errorf("timer armed %v for %v; want the first wake, 1s", kq.armed, time.Duration(kq.armedAt))
	}
	kq.move(&ks[2], laneSettle, int64(2*time.Second), true, 0) // 9 moves to 2 in the other lane
	kq.leave(&ks[0])                                           // 5 leaves
	kq.move(&ks[5], laneRenew, int64(7*time.Second), true, 0)  // 7 stays
	if got := lane(laneRenew); !slices.Equal(got, []int{1, 3, 3, 7}) {
		t.Errorf("renew lane = %v after a move and a leave", got)
	}
	if got := lane(laneSettle); !slices.Equal(got, []int{2}) {
		t.Errorf("settle lane = %v", got)
	}
	if ks[0].lane != 0 || kq.move(&ks[0], laneRenew, 0, true, 0) {
		t.Error("a keeper that left is still waiting")
	}
}
