package benchratio

import (
	"testing"
	"time"
)

func TestRunCountsAndMetrics(t *testing.T) {
	var variant, anchor int
	var sink []byte
	res := testing.Benchmark(func(b *testing.B) {
		variant, anchor = 0, 0
		Run(b, func(n int) {
			variant += n
			for range n {
				sink = make([]byte, 64) // one allocation per operation
			}
		}, func(n int) { anchor += n })
	})
	_ = sink
	if variant != res.N || anchor != res.N {
		t.Errorf("ran %d variant and %d anchor operations; want %d each", variant, anchor, res.N)
	}
	for _, unit := range []string{"anchor-ns/op", "ratio", "speed"} {
		if _, ok := res.Extra[unit]; !ok {
			t.Errorf("no %s metric in %v", unit, res.Extra)
		}
	}
	if a := res.Extra["allocs/op"]; a < 0.99 || a > 1.01 {
		t.Errorf("allocs/op = %v; want the variant's 1", a)
	}
}

func TestRunTimedUsesTheReturnedTimes(t *testing.T) {
	var variant, anchor, rounds int
	var got Result
	res := testing.Benchmark(func(b *testing.B) {
		variant, anchor, rounds = 0, 0, 0
		got = RunTimed(b, 4, func(n int) time.Duration {
			variant += n
			rounds++
			return time.Duration(3*n) * time.Millisecond
		}, func(n int) time.Duration {
			anchor += n
			return time.Duration(2*n) * time.Millisecond
		})
	})
	if variant != res.N || anchor != res.N {
		t.Errorf("ran %d variant and %d anchor operations; want %d each", variant, anchor, res.N)
	}
	if rounds > 4 {
		t.Errorf("%d rounds; want at most 4", rounds)
	}
	if got.Ratio != 1.5 || got.VariantNs != 3e6 || got.AnchorNs != 2e6 {
		t.Errorf("RunTimed = %+v; want ratio 1.5 of 3e6 and 2e6 ns/op", got)
	}
	if s := res.Extra["speed"]; s < 0.666 || s > 0.667 {
		t.Errorf("speed = %v; want 2/3", s)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v; want %v", tt.in, got, tt.want)
		}
	}
}
