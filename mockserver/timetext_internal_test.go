package mockserver

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendTimeTextIsAppendText compares appendTimeText with
// time.Time.AppendText at the edges of the years it writes itself, at
// every precision, in UTC and in zones it leaves to AppendText, and on
// random times.
func TestAppendTimeTextIsAppendText(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 7, 15, 4, 5, 0, time.UTC),
		time.Date(2026, 2, 28, 9, 8, 7, 100_000_000, time.UTC),
		time.Date(2024, 2, 29, 1, 2, 3, 120_000_000, time.UTC),
		time.Date(2026, 12, 7, 15, 4, 5, 123_000_000, time.UTC),
		time.Date(2026, 12, 7, 15, 4, 5, 1, time.UTC),
		time.Date(2026, 12, 7, 15, 4, 5, 10, time.UTC),
		time.Date(2026, 12, 7, 15, 4, 5, 123456789, time.UTC),
		time.Date(2026, 12, 7, 15, 4, 5, 0, time.FixedZone("", 0)),
		time.Date(2026, 12, 7, 15, 4, 5, 5e8, time.FixedZone("", 3600)),
		time.Date(2026, 12, 7, 15, 4, 5, 0, time.Local),
		time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("", -3600)), // year 10000 in UTC
		time.Now(),            // with a monotonic reading
		time.Now().UTC(),      // with none
		time.Unix(0, 0).UTC(), // the epoch
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		sec := rng.Int64N(10200*365*86400) - 62135596800 - 100*365*86400 // years -100 to about 10100
		nsec := rng.Int64N(1e9)
		nsec -= nsec % []int64{1, 1e3, 1e6, 1e8, 1e9}[rng.IntN(5)] // every precision
		times = append(times, time.Unix(sec, nsec).UTC())
	}
	for _, tm := range times {
		want, wantErr := tm.AppendText([]byte("x"))
		got, gotErr := appendTimeText([]byte("x"), tm)
		if (gotErr == nil) != (wantErr == nil) || wantErr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%v: appendTimeText = %q, %v; AppendText %q, %v", tm, got, gotErr, want, wantErr)
		}
	}
}

// TestAppendTimeTextAllocations: a payment's time in UTC is written into
// the buffer given, nothing else allocated.
func TestAppendTimeTextAllocations(t *testing.T) {
	b := make([]byte, 0, 64)
	tm := time.Date(2026, 12, 7, 15, 4, 5, 123_000_000, time.UTC)
	if n := testing.AllocsPerRun(100, func() { _, _ = appendTimeText(b[:0], tm) }); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}
