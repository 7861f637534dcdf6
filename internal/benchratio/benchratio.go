// Package benchratio runs a benchmark's variant and its raw anchor
// alternately in one process and reports the ratio of their times, so that
// a noisy machine slows both alike instead of faking a win or a loss.
//
// A benchmark calls Run with two functions that each perform n operations:
//
//	func BenchmarkX(b *testing.B) {
//		benchratio.Run(b, func(n int) { for range n { variant() } },
//			func(n int) { for range n { anchor() } })
//	}
//
// go test -bench prints, besides ns/op (the variant's), the metrics
// anchor-ns/op, ratio (the variant's time over the anchor's: 1.25 means the
// variant takes 25 % longer, that is runs at 0.80 of the anchor's
// throughput) and speed (its inverse), each the median of the rounds, and
// the variant's own B/op and allocs/op.
package benchratio

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// Rounds is how many times Run alternates the variant and the anchor, at
// most (fewer when b.N is smaller).
const Rounds = 64

// Run runs variant and anchor b.N operations each, split into alternating
// rounds (which one goes first alternates too), and reports their medians
// and ratio as metrics of b. Each function must perform exactly n
// operations. Run must be called once per benchmark function, in place of a
// b.N loop.
func Run(b *testing.B, variant, anchor func(n int)) {
	b.Helper()
	b.ReportAllocs() // so that go test prints the B/op and allocs/op reported below
	rounds := min(b.N, Rounds)
	per := b.N / rounds
	var v, a, ratios []float64
	var mallocs, bytes uint64
	var ms runtime.MemStats
	b.ResetTimer()
	for i := range rounds {
		n := per
		if i == rounds-1 {
			n = b.N - per*(rounds-1)
		}
		timeOf := func(f func(int), count bool) float64 {
			if count {
				runtime.ReadMemStats(&ms)
				mallocs, bytes = mallocs-ms.Mallocs, bytes-ms.TotalAlloc
			}
			t0 := time.Now()
			f(n)
			d := time.Since(t0)
			if count {
				runtime.ReadMemStats(&ms)
				mallocs, bytes = mallocs+ms.Mallocs, bytes+ms.TotalAlloc
			}
			return float64(d.Nanoseconds()) / float64(n)
		}
		var tv, ta float64
		if i%2 == 0 {
			tv, ta = timeOf(variant, true), timeOf(anchor, false)
		} else {
			ta, tv = timeOf(anchor, false), timeOf(variant, true)
		}
		v, a, ratios = append(v, tv), append(a, ta), append(ratios, tv/ta)
	}
	b.StopTimer()
	r := median(ratios)
	b.ReportMetric(median(v), "ns/op")
	b.ReportMetric(median(a), "anchor-ns/op")
	b.ReportMetric(r, "ratio")
	b.ReportMetric(1/r, "speed")
	b.ReportMetric(float64(mallocs)/float64(b.N), "allocs/op")
	b.ReportMetric(float64(bytes)/float64(b.N), "B/op")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
