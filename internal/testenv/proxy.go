package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a target address.
// Stop closes the port and every forwarded connection; Restart listens on
// the same port again. Tests use it to take a store away from one instance
// (an outage, or a network cut) while the real server keeps running for
// everyone else. Create it with StartProxy; it is safe for concurrent use.
type Proxy struct {
	target string

	mu    sync.Mutex
	addr  string
	ln    net.Listener // nil while stopped
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartProxy starts a Proxy to target on a free loopback port. It is
// stopped when tb's test ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p := &Proxy{target: target, addr: "127.0.0.1:0"}
	p.Restart(tb)
	tb.Cleanup(p.Stop)
	return p
}

// Addr returns the host:port the proxy listens on.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Restart listens on the proxy's port again after Stop. It fails tb when the
// port cannot be had back. Restarting a running proxy is a no-op.
func (p *Proxy) Restart(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		tb.Fatalf("testenv: proxy listen on %s: %v", p.addr, err)
	}
	p.ln, p.addr, p.conns = ln, ln.Addr().String(), make(map[net.Conn]struct{})
	p.wg.Add(1)
	go p.accept(ln)
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(ln, c)
		}()
	}
}

func (p *Proxy) serve(ln net.Listener, client net.Conn) {
	defer client.Close()
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer upstream.Close()
	if !p.track(ln, client, upstream) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
	client.Close()
	upstream.Close()
	<-done
}

// track registers the connections of a forward accepted by ln; it refuses
// them when ln was stopped meanwhile, so that no forward outlives Stop.
func (p *Proxy) track(ln net.Listener, cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// Stop closes the listener and every forwarded connection, and waits for
// the proxy's goroutines. It may be called more than once.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
