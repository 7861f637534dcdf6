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
// the variant's own B/op and allocs/op. RunTimed does the same for
// functions that time themselves, leaving their setup out.
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
	var mallocs, bytes uint64
	var ms runtime.MemStats
	timed := func(f func(int), count bool) func(int) time.Duration {
		return func(n int) time.Duration {
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
			return d
		}
	}
	run(b, Rounds, timed(variant, true), timed(anchor, false))
	b.ReportMetric(float64(mallocs)/float64(b.N), "allocs/op")
	b.ReportMetric(float64(bytes)/float64(b.N), "B/op")
}

// Result holds the medians RunTimed reported: nanoseconds per operation
// of the variant and of the anchor, and the median of the rounds' ratios.
type Result struct {
	VariantNs, AnchorNs, Ratio float64
}

// RunTimed is Run for functions that time themselves: each performs n
// operations and returns how long they took, leaving out its setup (rows
// to write first, say), and the b.N operations are split into at most
// rounds rounds (0 means Rounds), so that a round can be made long enough
// for what it measures. It reports the metrics Run does except B/op and
// allocs/op (the setup would count), and returns them.
func RunTimed(b *testing.B, rounds int, variant, anchor func(n int) time.Duration) Result {
	b.Helper()
	if rounds <= 0 {
		rounds = Rounds
	}
	return run(b, rounds, variant, anchor)
}

func run(b *testing.B, rounds int, variant, anchor func(n int) time.Duration) Result {
	rounds = min(b.N, rounds)
	per := b.N / rounds
	var v, a, ratios []float64
	b.ResetTimer()
	for i := range rounds {
		n := per
		if i == rounds-1 {
			n = b.N - per*(rounds-1)
		}
		timeOf := func(f func(int) time.Duration) float64 {
			return float64(f(n).Nanoseconds()) / float64(n)
		}
		var tv, ta float64
		if i%2 == 0 {
			tv, ta = timeOf(variant), timeOf(anchor)
		} else {
			ta, tv = timeOf(anchor), timeOf(variant)
		}
		v, a, ratios = append(v, tv), append(a, ta), append(ratios, tv/ta)
	}
	b.StopTimer()
	res := Result{VariantNs: median(v), AnchorNs: median(a), Ratio: median(ratios)}
	b.ReportMetric(res.VariantNs, "ns/op")
	b.ReportMetric(res.AnchorNs, "anchor-ns/op")
	b.ReportMetric(res.Ratio, "ratio")
	b.ReportMetric(1/res.Ratio, "speed")
	return res
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
