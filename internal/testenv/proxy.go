package testenv

import (
	"testing"

	"github.com/saferetry/saferetry/internal/tcpproxy"
)

// Proxy is a tcpproxy.Proxy for tests: StartProxy stops it when the test
// ends, and Restart fails the test when the port cannot be had back. It is
// safe for concurrent use.
type Proxy struct{ *tcpproxy.Proxy }

// StartProxy starts a Proxy to target on a free loopback port, with no
// latency and not refusing. It is stopped when tb's test ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := tcpproxy.Listen(target)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(p.Stop)
	return &Proxy{p}
}

// Restart listens on the proxy's port again after Stop; see
// tcpproxy.Proxy.Restart.
func (p *Proxy) Restart(tb testing.TB) {
	tb.Helper()
	if err := p.Proxy.Restart(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}
