package conformance

import "time"

// evidenceTime is how long the exchanges of a check's evidence took:
// from the first request sent to the end of the last exchange, as
// concurrent ones overlap; when an exchange's start is unknown (a Report
// decoded from JSON keeps only Elapsed), the sum of their Elapsed.
func evidenceTime(ev []Exchange) time.Duration {
	var first, last time.Time
	var sum time.Duration
	known := true
	for _, ex := range ev {
		d := time.Duration(ex.Elapsed)
		sum += d
		if ex.began.IsZero() {
			known = false
			continue
		}
		if first.IsZero() || ex.began.Before(first) {
			first = ex.began
		}
		if end := ex.began.Add(d); end.After(last) {
			last = end
		}
	}
	if !known || len(ev) == 0 {
		return sum
	}
	return last.Sub(first)
}
