package benchratio

import (
	"testing"
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
