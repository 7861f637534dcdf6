package testenv

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// ClosedWithin reads r, from conn, until the server closes conn (an EOF,
// or a reset when it closed with bytes of ours unread) and reports how
// long that took; it fails the test if conn is still open after limit.
func ClosedWithin(tb testing.TB, conn net.Conn, r io.Reader, limit time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Fatalf("connection still open after %v", limit)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		tb.Fatalf("reading until the server closes: %v", err)
	}
	return time.Since(start)
}
