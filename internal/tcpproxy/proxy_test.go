package tcpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The proxy's tests run on a noisy machine under -race: they check lower
// bounds on time exactly, and upper bounds only generously.

// server serves every connection with a handler on a loopback port, and
// counts the connections it accepted and those still open.
type server struct {
	addr             string
	accepted, active atomic.Int64
}

func startServer(t *testing.T, handle func(net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: ln.Addr().String()}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.active.Add(1)
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer s.active.Add(-1)
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return s
}

// echoServer sends every byte back.
func echoServer(t *testing.T) *server {
	return startServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// client is a test's connection to a proxy.
type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c, bufio.NewReader(c)}
}

// roundTrip sends line to an echo server and returns how long it took to
// come back.
func (c *client) roundTrip(t *testing.T, line string) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetDeadline(start.Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		t.Fatalf("send %q: %v", line, err)
	}
	if got, err := c.r.ReadString('\n'); err != nil || got != line+"\n" {
		t.Fatalf("echo of %q: %q, %v", line, got, err)
	}
	return time.Since(start)
}

// readErr reads until the connection fails and returns why. It fails t
// when that takes so long that the read deadline ends it, or when bytes
// arrive first.
func (c *client) readErr(t *testing.T) error {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c.r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open (read %q)", b)
	}
	if len(b) > 0 {
		t.Errorf("read %q before the connection closed, want nothing", b)
	}
	if err == nil {
		err = io.EOF // ReadAll's nil stands for EOF
	}
	return err
}

// echo sends line through a connection of its own and returns the answer.
func echo(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// proxyGoroutines counts the goroutines running the proxy's code or
// started by it.
func proxyGoroutines() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("tcpproxy.(*Proxy).")) || bytes.Contains(g, []byte("tcpproxy.(*forward).")) {
			n++
		}
	}
	return n
}

func TestProxyLatency(t *testing.T) {
	const d = 100 * time.Millisecond
	p := startProxy(t, echoServer(t).addr)
	open := dial(t, p.Addr())
	open.roundTrip(t, "before")

	p.SetLatency(d)
	if rt := open.roundTrip(t, "open"); rt < 2*d || rt >= 2*time.Second {
		t.Errorf("round trip on a connection open before SetLatency(%v) took %v, want 2*%v or a little more", d, rt, d)
	}
	if rt := dial(t, p.Addr()).roundTrip(t, "new"); rt < 2*d || rt >= 2*time.Second {
		t.Errorf("round trip on a new connection took %v, want 2*%v or a little more", rt, d)
	}

	p.SetLatency(0)
	if rt := open.roundTrip(t, "after"); rt >= d {
		t.Errorf("round trip after SetLatency(0) took %v, want well under %v", rt, d)
	}
}

// TestProxyLatencyPipelines checks that latency is not bandwidth: chunks
// sent one after the other are each delayed by the latency, not by the
// latencies of the chunks before them added up.
func TestProxyLatencyPipelines(t *testing.T) {
	const (
		d   = 100 * time.Millisecond
		n   = 20
		gap = 5 * time.Millisecond
	)
	p := startProxy(t, echoServer(t).addr)
	p.SetLatency(d)
	c := dial(t, p.Addr())
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))

	sent := make(chan time.Time, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(gap)
		defer tick.Stop()
		for i := range n {
			sent <- time.Now()
			if _, err := fmt.Fprintln(c, i); err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			<-tick.C
		}
	}()
	defer func() { <-done }()

	var first time.Time
	for i := range n {
		line, err := c.r.ReadString('\n')
		arrived := time.Now()
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if line != strconv.Itoa(i)+"\n" {
			t.Fatalf("read %q, want %d: out of order", line, i)
		}
		at := <-sent
		if i == 0 {
			first = at
		}
		if rt := arrived.Sub(at); rt < 2*d {
			t.Errorf("chunk %d came back after %v, want at least 2*%v", i, rt, d)
		}
		// One after the other, the delays would add up to n*d = 2s each way.
		if i == n-1 {
			if all := arrived.Sub(first); all >= 2*d+n*gap+700*time.Millisecond {
				t.Errorf("the last of %d chunks came back %v after the first was sent, want about 2*%v + %d*%v", n, all, d, n, gap)
			}
		}
	}
}

// TestProxyLatencyChange checks that bytes keep the delay they were read
// with, and that bytes read later with a shorter delay wait behind them.
func TestProxyLatencyChange(t *testing.T) {
	const d = 300 * time.Millisecond
	p := startProxy(t, echoServer(t).addr)
	p.SetLatency(d)
	c := dial(t, p.Addr())
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))

	start := time.Now()
	fmt.Fprintln(c, "slow")
	<-time.After(d / 3) // lets the proxy read "slow" under the old latency
	p.SetLatency(0)
	fmt.Fprintln(c, "fast")
	for _, want := range []string{"slow\n", "fast\n"} {
		got, err := c.r.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
		if took := time.Since(start); took < d {
			t.Errorf("%q came back %v after the first send, want at least %v", want, took, d)
		}
	}
}

// TestProxyDeliversBeforeClose checks that a peer's close reaches the
// other peer after the bytes sent before it, not ahead of them.
func TestProxyDeliversBeforeClose(t *testing.T) {
	const d = 100 * time.Millisecond
	t.Run("client closes", func(t *testing.T) {
		got := make(chan string, 1)
		srv := startServer(t, func(c net.Conn) {
			b, _ := io.ReadAll(c)
			got <- string(b)
		})
		p := startProxy(t, srv.addr)
		p.SetLatency(d)
		start := time.Now()
		c := dial(t, p.Addr())
		fmt.Fprintln(c, "last words")
		c.Close()
		select {
		case b := <-got:
			if b != "last words\n" {
				t.Errorf("the target read %q before EOF, want %q", b, "last words\n")
			}
			if took := time.Since(start); took < d {
				t.Errorf("the target had EOF after %v, want at least %v", took, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the target never saw the client's close")
		}
	})
	t.Run("target closes", func(t *testing.T) {
		srv := startServer(t, func(c net.Conn) { fmt.Fprintln(c, "bye") })
		p := startProxy(t, srv.addr)
		p.SetLatency(d)
		start := time.Now()
		c := dial(t, p.Addr())
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "bye\n" {
			t.Errorf("the client read %q, %v; want %q then EOF", b, err, "bye\n")
		}
		if took := time.Since(start); took < d {
			t.Errorf("the client had EOF after %v, want at least %v", took, d)
		}
	})
}

func TestProxyCut(t *testing.T) {
	srv := echoServer(t)
	p := startProxy(t, srv.addr)
	if n := p.Cut(); n != 0 {
		t.Errorf("Cut with no connection = %d, want 0", n)
	}
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	a.roundTrip(t, "a")
	b.roundTrip(t, "b")
	if n := p.Conns(); n != 2 {
		t.Fatalf("Conns = %d, want 2", n)
	}

	// Bytes held back an hour must not hold the cut back.
	p.SetLatency(time.Hour)
	fmt.Fprintln(a, "pending")
	if n := p.Cut(); n != 2 {
		t.Errorf("Cut = %d, want 2", n)
	}
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns after Cut = %d, want 0", n)
	}
	for _, c := range []*client{a, b} {
		if err := c.readErr(t); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("read after Cut: %v, want a connection reset", err)
		}
	}
	Eventually(t, "the target's ends of the cut connections are closed", func() bool { return srv.active.Load() == 0 })

	p.SetLatency(0)
	dial(t, p.Addr()).roundTrip(t, "after the cut")
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns after a new connection = %d, want 1", n)
	}
}

func TestProxyRefuse(t *testing.T) {
	srv := echoServer(t)
	p := startProxy(t, srv.addr)
	held := dial(t, p.Addr())
	held.roundTrip(t, "before")
	accepted := srv.accepted.Load()

	p.SetRefuse(true)
	// The reset may come before the dial has seen the connection made.
	if c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second); err == nil {
		refused := &client{c, bufio.NewReader(c)}
		t.Cleanup(func() { c.Close() })
		_ = refused.readErr(t) // a reset or EOF; it fails t if the connection stays open
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("dialing while refusing: %v, want success or a connection reset", err)
	}
	held.roundTrip(t, "a connection forwarded before SetRefuse(true) still works")
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns while refusing = %d, want 1", n)
	}

	p.SetRefuse(false)
	dial(t, p.Addr()).roundTrip(t, "after SetRefuse(false)")
	// The target accepts in order: a refused connection that had reached
	// it would count before this one.
	if got := srv.accepted.Load() - accepted; got != 1 {
		t.Errorf("the target accepted %d connections since SetRefuse(true), want 1 (after SetRefuse(false))", got)
	}
}

func TestProxyStopAndRestart(t *testing.T) {
	p := startProxy(t, echoServer(t).addr)
	addr := p.Addr()
	if got, err := echo(addr, "one"); err != nil || got != "one\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	// A connection open across Stop is cut.
	held := dial(t, addr)
	held.roundTrip(t, "held")
	p.Stop()
	_ = held.readErr(t)
	if _, err := echo(addr, "two"); err == nil {
		t.Error("the proxy answered while stopped")
	}
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns while stopped = %d, want 0", n)
	}
	p.Stop() // twice is fine
	p.mustRestart(t)
	if p.Addr() != addr {
		t.Errorf("restarted on %s, want the same port %s", p.Addr(), addr)
	}
	if got, err := echo(addr, "three"); err != nil || got != "three\n" {
		t.Fatalf("after Restart: %q, %v", got, err)
	}
}

func TestProxyLeavesNoGoroutine(t *testing.T) {
	p := startProxy(t, echoServer(t).addr)
	// A fresh proxy has its accept loop; wait for the goroutines of earlier
	// tests' proxies, which may still be on their way out.
	Eventually(t, "only the accept loop runs", func() bool { return proxyGoroutines() == 1 })
	idle := proxyGoroutines()
	p.SetLatency(time.Hour)
	for range 3 {
		fmt.Fprintln(dial(t, p.Addr()), "pending")
	}
	Eventually(t, "3 connections are forwarded", func() bool { return p.Conns() == 3 })
	if n := proxyGoroutines(); n <= idle {
		t.Fatalf("%d proxy goroutines with 3 connections, %d with none: the count sees nothing", n, idle)
	}

	p.Cut()
	Eventually(t, "the goroutines of cut connections return", func() bool { return proxyGoroutines() == idle })

	for range 3 {
		fmt.Fprintln(dial(t, p.Addr()), "pending")
	}
	Eventually(t, "3 connections are forwarded again", func() bool { return p.Conns() == 3 })
	p.Stop()
	// Stop has waited for them; some may still be on their way out.
	Eventually(t, "no proxy goroutine is left after Stop", func() bool { return proxyGoroutines() == 0 })
}

// TestProxyConcurrentUse gives the race detector every method at once.
func TestProxyConcurrentUse(t *testing.T) {
	p := startProxy(t, echoServer(t).addr)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = echo(p.Addr(), strconv.Itoa(i)) // cuts and refusals fail some
			}
		})
	}
	for i := range 50 {
		p.SetLatency(time.Duration(i%3) * time.Millisecond)
		p.SetRefuse(i%5 == 0)
		switch i % 10 {
		case 3:
			p.Cut()
		case 7:
			p.Stop()
			p.mustRestart(t)
		}
		_ = p.Conns()
		<-time.After(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	p.SetRefuse(false)
	p.SetLatency(0)
	if got, err := echo(p.Addr(), "calm"); err != nil || got != "calm\n" {
		t.Errorf("after the storm: %q, %v", got, err)
	}
	p.Stop()
	Eventually(t, "no proxy goroutine is left after Stop", func() bool { return proxyGoroutines() == 0 })
}

// startProxy starts a Proxy to target, stopped when t ends.
func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func (p *Proxy) mustRestart(t *testing.T) {
	t.Helper()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
}

// Eventually polls cond until it holds, failing t after 10 s.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// silent fails t when c reads anything, or sees its connection end, within
// d: a blackholed or stalled connection just goes quiet.
func (c *client) silent(t *testing.T, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := c.r.ReadString('\n')
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want nothing until the deadline", b, err)
	}
}

func TestProxyBlackhole(t *testing.T) {
	srv := echoServer(t)
	p := startProxy(t, srv.addr)
	a := dial(t, p.Addr())
	a.roundTrip(t, "before")
	if n := p.Blackhole(); n != 1 {
		t.Errorf("Blackhole = %d, want 1", n)
	}
	// Writes succeed, nothing comes back, nothing closes.
	if _, err := fmt.Fprintln(a, "lost"); err != nil {
		t.Fatalf("write to a blackholed connection: %v", err)
	}
	a.silent(t, 200*time.Millisecond)
	if n := srv.active.Load(); n != 1 {
		t.Errorf("the target has %d connections open, want 1: a blackhole closes nothing", n)
	}
	// New connections are forwarded; the blackholed one stays lost.
	b := dial(t, p.Addr())
	b.roundTrip(t, "new")
	if _, err := fmt.Fprintln(a, "still lost"); err != nil {
		t.Fatalf("write: %v", err)
	}
	a.silent(t, 200*time.Millisecond)
	if n := p.Conns(); n != 2 {
		t.Errorf("Conns = %d, want 2", n)
	}
	// The peer's close is lost too; the target's end stays open.
	a.Close()
	time.Sleep(100 * time.Millisecond)
	if n := srv.active.Load(); n != 2 {
		t.Errorf("the target has %d connections open after the blackholed peer closed, want 2", n)
	}
	if n := p.Cut(); n != 2 {
		t.Errorf("Cut = %d, want 2 (the blackholed connection counts until cut)", n)
	}
	Eventually(t, "the target's ends are closed", func() bool { return srv.active.Load() == 0 })
}

func TestProxyStall(t *testing.T) {
	srv := echoServer(t)
	p := startProxy(t, srv.addr)
	a := dial(t, p.Addr())
	a.roundTrip(t, "before")
	p.SetStall(true)
	p.SetStall(true) // idempotent
	if _, err := fmt.Fprintln(a, "held"); err != nil {
		t.Fatalf("write to a stalled connection: %v", err)
	}
	a.silent(t, 200*time.Millisecond)
	// A new connection is accepted, and held too.
	b := dial(t, p.Addr())
	if _, err := fmt.Fprintln(b, "held too"); err != nil {
		t.Fatalf("write: %v", err)
	}
	b.silent(t, 100*time.Millisecond)
	p.SetStall(false)
	p.SetStall(false)
	for _, x := range []struct {
		c    *client
		want string
	}{{a, "held\n"}, {b, "held too\n"}} {
		_ = x.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got, err := x.c.r.ReadString('\n'); err != nil || got != x.want {
			t.Errorf("after the stall: %q, %v; want %q", got, err, x.want)
		}
	}
	a.roundTrip(t, "after")
	b.roundTrip(t, "after")
}
