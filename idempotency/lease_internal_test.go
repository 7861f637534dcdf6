package idempotency

import (
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	const iv = 300 * time.Millisecond
	tests := []struct {
		left, want time.Duration
	}{
		{900 * time.Millisecond, iv},                     // plenty left: the usual pace
		{300 * time.Millisecond, 100 * time.Millisecond}, // a third of what is left
		{60 * time.Millisecond, 30 * time.Millisecond},   // no faster than a tenth of the interval
		{0, iv}, // may have lapsed: keep trying at the usual pace
		{-time.Second, iv},
	}
	for _, tt := range tests {
		if got := retryDelay(iv, tt.left); got != tt.want {
			t.Errorf("retryDelay(%v, %v) = %v, want %v", iv, tt.left, got, tt.want)
		}
	}
}
