//go:build !linux

package testenv

import "testing"

// FullQueueAddr skips: the full accept queue that makes a dial hang is
// Linux's behaviour (see the Linux version).
func FullQueueAddr(t testing.TB) string {
	t.Skip("needs Linux's drop of a SYN to a full accept queue")
	return ""
}
