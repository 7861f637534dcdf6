package testenv

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
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

// RawRequest opens a connection to the HTTP server at url
// ("http://host:port") and writes req to it, bytes as they go on the wire:
// for requests that net/http would not send, such as a body that stops
// short. The caller closes the connection, before it closes a server that
// waits for active connections.
func RawRequest(tb testing.TB, url, req string) net.Conn {
	tb.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		tb.Fatal(err)
	}
	return conn
}

// ReadResponse reads one answer from br, a raw connection's reader, and
// its body to the end, which it closes; it fails the test if either read
// fails.
func ReadResponse(tb testing.TB, br *bufio.Reader) *http.Response {
	tb.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		tb.Fatalf("reading the answer's body: %v", err)
	}
	return resp
}
