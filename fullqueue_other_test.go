//go:build !linux

package saferetry

import "testing"

// fullQueueAddr skips: the full accept queue that makes a dial hang is
// Linux's behaviour (see the Linux version).
func fullQueueAddr(t *testing.T) string {
	t.Skip("needs Linux's drop of a SYN to a full accept queue")
	return ""
}
