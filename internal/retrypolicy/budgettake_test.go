package retrypolicy

import (
	"math"
	"testing"
)

// TestBudgetRefundBelowZero: a bucket that Take left below zero comes back
// up by what Refund returns, whatever its capacity: with the largest one,
// what is missing from capacity passes the int64 range, and must not wrap
// the bucket around to full (or to another negative count).
func TestBudgetRefundBelowZero(t *testing.T) {
	for _, capacity := range []int{10, math.MaxInt} {
		b := NewBudget(capacity, 1)
		c := int64(capacity)
		if !b.Spend(c) {
			t.Fatalf("capacity %d: a full bucket did not pay its capacity", capacity)
		}
		b.Take(c) // a retry paid again after another request spent its refund
		if got, want := b.Refund(1), int64(1); got != want {
			t.Errorf("capacity %d: Refund(1) gave back %d, want %d", capacity, got, want)
		}
		if got, want := b.Available(), -c+1; got != want {
			t.Errorf("capacity %d: %d tokens after Refund(1), want %d", capacity, got, want)
		}
	}
}
