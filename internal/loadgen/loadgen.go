// Package loadgen drives HTTP servers with closed-loop clients, for the
// benchmarks that compare a server with its raw anchor: a fixed number of
// workers each send one request at a time over keep-alive connections, for
// a set duration, and the result is the requests per second and latency
// percentiles of the answers that passed a check. Compare runs alternately
// in one process: Compare does, round after round, and reports medians, so
// that a machine slowed by other work slows both sides alike.
package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Target is one server under load.
type Target struct {
	// Name labels the target in reports.
	Name string
	// Request makes the i-th request of worker w. Each call is its own
	// request: a fresh key per call makes every request a first execution.
	Request func(w, i int) (*http.Request, error)
	// OK reports whether an answer counts; nil accepts 2xx.
	OK func(*http.Response) bool
}

// Result is what one run of a Target measured.
type Result struct {
	Requests int // answers that passed OK
	Failed   int // answers that did not, and transport errors
	Elapsed  time.Duration
	P50, P99 time.Duration
	// Err is the first failure, when there was one.
	Err error
}

// RPS is the passed answers per second.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Run sends t's requests from workers clients over client for d, or until
// ctx is done, and returns what it measured. client is shared by the
// workers: give its Transport at least workers idle connections per host.
func Run(ctx context.Context, client *http.Client, t Target, workers int, d time.Duration) Result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ok := t.OK
	if ok == nil {
		ok = func(r *http.Response) bool { return r.StatusCode/100 == 2 }
	}
	type tally struct {
		lat    []time.Duration
		failed int
		err    error
	}
	tallies := make([]tally, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tl := &tallies[w]
			for i := 0; ctx.Err() == nil; i++ {
				lat, err := once(ctx, client, t, ok, w, i)
				switch {
				case ctx.Err() != nil:
					return // the run ended during the request: not counted
				case err != nil:
					tl.failed++
					if tl.err == nil {
						tl.err = err
					}
				default:
					tl.lat = append(tl.lat, lat)
				}
			}
		})
	}
	wg.Wait()
	res := Result{Elapsed: time.Since(start)}
	var all []time.Duration
	for _, tl := range tallies {
		all = append(all, tl.lat...)
		res.Failed += tl.failed
		if res.Err == nil {
			res.Err = tl.err
		}
	}
	res.Requests = len(all)
	res.P50, res.P99 = percentile(all, 0.50), percentile(all, 0.99)
	return res
}

// once sends one request and reads its answer whole.
func once(ctx context.Context, client *http.Client, t Target, ok func(*http.Response) bool, w, i int) (time.Duration, error) {
	req, err := t.Request(w, i)
	if err != nil {
		return 0, err
	}
	began := time.Now()
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	lat := time.Since(began)
	if err != nil {
		return 0, err
	}
	if !ok(resp) {
		return 0, fmt.Errorf("loadgen: %s: status %d", t.Name, resp.StatusCode)
	}
	return lat, nil
}

// percentile returns the p-quantile of lat (nearest rank), sorting it.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	i := int(p*float64(len(lat))+0.5) - 1
	return lat[min(max(i, 0), len(lat)-1)]
}

// Comparison is the medians of alternating runs of a target and its anchor.
type Comparison struct {
	Anchor, Target Result // the runs of median requests per second
	// Ratio is the median over rounds of target/anchor requests per
	// second; P99Ratio the same of the 99th percentile latencies.
	Ratio, P99Ratio float64
	Rounds          int
}

// Compare runs anchor and target alternately, rounds times each for d
// per run (the anchor first in odd rounds, the target first in even ones),
// and returns the medians. It stops at the first run with a failed answer
// and returns its error.
func Compare(ctx context.Context, client *http.Client, anchor, target Target, workers, rounds int, d time.Duration) (Comparison, error) {
	var as, ts []Result
	var ratios, p99s []float64
	for r := range rounds {
		pair := [2]Target{anchor, target}
		if r%2 == 1 {
			pair = [2]Target{target, anchor}
		}
		var got [2]Result
		for j, t := range pair {
			got[j] = Run(ctx, client, t, workers, d)
			if got[j].Err != nil {
				return Comparison{}, fmt.Errorf("round %d, %s: %d failed: %w", r+1, t.Name, got[j].Failed, got[j].Err)
			}
		}
		a, t := got[0], got[1]
		if r%2 == 1 {
			a, t = t, a
		}
		as, ts = append(as, a), append(ts, t)
		ratios = append(ratios, t.RPS()/a.RPS())
		p99s = append(p99s, float64(t.P99)/float64(max(a.P99, 1)))
	}
	return Comparison{
		Anchor: medianRun(as), Target: medianRun(ts),
		Ratio: median(ratios), P99Ratio: median(p99s), Rounds: rounds,
	}, ctx.Err()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianRun(rs []Result) Result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b Result) int {
		switch {
		case a.RPS() < b.RPS():
			return -1
		case a.RPS() > b.RPS():
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}
