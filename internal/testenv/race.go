//go:build race

package testenv

// RaceEnabled reports whether the binary runs under the race detector, where
// allocation counts differ (sync.Pool drops what is put back at random).
const RaceEnabled = true
