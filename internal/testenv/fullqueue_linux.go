//go:build linux

package testenv

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// FullQueueAddr returns a loopback address whose listener never accepts
// and whose accept queue is full (a backlog of 0, one connection queued),
// so that Linux drops every new SYN and a dial to it hangs until its
// context or timeout ends it: a server too busy to take connections. The
// listener and the queued connection are closed when t ends.
func FullQueueAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("filling the accept queue: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if c, err := net.DialTimeout("tcp", addr, 50*time.Millisecond); err == nil {
		c.Close()
		t.Skip("the kernel took a connection past a full accept queue")
	}
	return addr
}
