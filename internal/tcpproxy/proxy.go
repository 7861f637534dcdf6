// Package tcpproxy forwards TCP connections from a loopback port to a
// target, and injects the faults of a network between them on demand:
// latency, cuts, refused connections, an outage, silent losses (a
// blackhole, a stall). The store fault tests and
// the chaos suite put it between application instances and their store.
package tcpproxy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target address.
//
// Tests put it between an application instance and its store to bring
// faults to that instance alone while the real server keeps running for
// everyone else: SetLatency delays the bytes, Cut breaks the open
// connections as a network cut would, SetRefuse resets new connections as
// soon as they arrive, and Stop closes the port until Restart (an outage).
// Blackhole and SetStall fail silently, with no reset and no close, as a
// network that drops packets does: Blackhole loses the open connections
// for good (a NAT or firewall that forgot them), SetStall holds every byte
// until it is turned off (a partition that heals). Conns tells how many
// connections are being forwarded.
//
// Create it with Listen; the zero value is not usable. All methods are
// safe for concurrent use by multiple goroutines.
type Proxy struct {
	target  string
	latency atomic.Int64 // a time.Duration, never negative
	refuse  atomic.Bool

	// stallMu guards stalled, which is non-nil while SetStall is on and
	// closed when it is turned off.
	stallMu sync.Mutex
	stalled chan struct{}

	// life serializes Stop and Restart, so that Restart's wg.Add never
	// races the wg.Wait of a Stop in progress.
	life sync.Mutex
	wg   sync.WaitGroup // every goroutine the proxy started

	mu    sync.Mutex
	addr  string
	ln    net.Listener          // nil while stopped
	conns map[*forward]struct{} // nil while stopped
}

// Listen starts a Proxy to target on a free loopback port, with no latency
// and not refusing. Stop it when done.
func Listen(target string) (*Proxy, error) {
	p := &Proxy{target: target, addr: "127.0.0.1:0"}
	if err := p.Restart(); err != nil {
		return nil, err
	}
	return p, nil
}

// Addr returns the host:port the proxy listens on. It stays the same
// across Stop and Restart.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// SetLatency delays every byte by d in each direction, so a request and
// its answer take at least 2*d more. It models latency, not bandwidth:
// bytes read at time t are written on at t+d whatever is still in flight,
// and always in order. It applies at once to the bytes read from then on,
// on open and future connections; bytes already read keep the delay they
// were read with. 0 (or less) means no delay, the default. The setting
// survives Stop and Restart.
func (p *Proxy) SetLatency(d time.Duration) {
	p.latency.Store(int64(max(d, 0)))
}

// SetRefuse, while on, makes the proxy reset every new connection as soon
// as it is accepted, without dialing the target; the peer sees a
// connection reset when it dials, reads or writes. Connections forwarded already keep
// working. Unlike Stop, the port stays open, so dialing still succeeds.
// Off is the default. The setting survives Stop and Restart.
func (p *Proxy) SetRefuse(on bool) {
	p.refuse.Store(on)
}

// Blackhole makes every connection forwarded now lose all its bytes from
// then on, both ways and for good, without closing either end: what each
// peer sends is read and thrown away, so its writes succeed and its reads
// wait, and neither sees a reset or an end of file, as when a NAT or a
// stateful firewall between them forgot the connection (the peers' TCP
// keepalives, answered by the proxy's own sockets, do not notice either).
// Connections made afterwards are forwarded normally. A blackholed
// connection counts in Conns until both peers closed it, or Cut or Stop.
// It returns the number of connections blackholed.
func (p *Proxy) Blackhole() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.conns {
		f.lost.Store(true)
	}
	return len(p.conns)
}

// SetStall, while on, holds every byte on every connection, open or new,
// without closing either end, as a network partition does; turned off,
// it delivers the bytes held, in order, as TCP's retransmissions do once
// the partition heals. New connections are still accepted (the proxy's
// socket answers the handshake) but what they send is held too. A stall
// holds up to 1024 reads each way per connection; then the proxy stops
// reading, which TCP's flow control passes back to the sender. Off is the
// default. The setting survives Stop and Restart.
func (p *Proxy) SetStall(on bool) {
	p.stallMu.Lock()
	defer p.stallMu.Unlock()
	switch {
	case on && p.stalled == nil:
		p.stalled = make(chan struct{})
	case !on && p.stalled != nil:
		close(p.stalled)
		p.stalled = nil
	}
}

// flowing returns once no stall holds the bytes of f, true, or once f is
// closed, false.
func (p *Proxy) flowing(f *forward) bool {
	for {
		p.stallMu.Lock()
		stalled := p.stalled
		p.stallMu.Unlock()
		if stalled == nil {
			return f.ctx.Err() == nil
		}
		select {
		case <-stalled:
		case <-f.ctx.Done():
			return false
		}
	}
}

// Cut closes every forwarded connection now, at both ends and with a TCP
// reset, dropping the bytes still delayed by SetLatency, as a broken
// network would. Unlike Stop, the proxy keeps listening, so connections
// made afterwards are forwarded. It returns the number of connections cut:
// 0 when there were none or the proxy is stopped.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	fs := p.conns
	if fs != nil {
		p.conns = make(map[*forward]struct{})
	}
	p.mu.Unlock()
	for f := range fs {
		f.close(true)
	}
	return len(fs)
}

// Conns returns the number of connections being forwarded: accepted and
// not refused, and not yet closed by Cut, Stop, a failed dial of the
// target, or a peer. A connection a peer closed counts until the bytes
// delayed towards the other peer have been delivered. It is 0 while the
// proxy is stopped.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Restart listens on the proxy's port again after Stop. It returns an
// error when the port cannot be had back. Restarting a running proxy is a
// no-op.
func (p *Proxy) Restart() error {
	p.life.Lock()
	defer p.life.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("tcpproxy: listen on %s: %w", p.addr, err)
	}
	p.ln, p.addr, p.conns = ln, ln.Addr().String(), make(map[*forward]struct{})
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// Stop closes the listener and every forwarded connection, dropping the
// bytes still delayed, and waits until all the proxy's goroutines have
// returned. It may be called more than once.
func (p *Proxy) Stop() {
	p.life.Lock()
	defer p.life.Unlock()
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	fs := p.conns
	p.conns = nil
	p.mu.Unlock()
	for f := range fs {
		f.close(false)
	}
	p.wg.Wait()
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			reset(c)
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		f := &forward{client: c, ctx: ctx, cancel: cancel}
		if !p.track(ln, f) {
			f.close(false)
			continue
		}
		p.wg.Add(1)
		go p.serve(f)
	}
}

// track registers a forward accepted by ln; it refuses it when ln was
// stopped meanwhile, so that no forward outlives Stop.
func (p *Proxy) track(ln net.Listener, f *forward) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		return false
	}
	p.conns[f] = struct{}{}
	return true
}

// serve dials the target for f and runs one pipe each way until f closes.
func (p *Proxy) serve(f *forward) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, f)
		p.mu.Unlock()
	}()
	var d net.Dialer
	up, err := d.DialContext(f.ctx, "tcp", p.target)
	if err != nil {
		f.close(false)
		return
	}
	if !f.attach(up) {
		return
	}
	p.wg.Add(2)
	go p.pipe(f, f.client, up)
	go p.pipe(f, up, f.client)
	<-f.ctx.Done()
}

// A chunk is what one read returned, and when it is due at the other end.
type chunk struct {
	data []byte
	due  time.Time
}

// queueLen bounds the chunks in flight one way. A full queue stalls the
// reader, which TCP's flow control passes back to the sender.
const queueLen = 1024

// pipe copies src to dst through a queue: a reader goroutine stamps each
// chunk with its due time, and this goroutine writes each chunk when it is
// due. Delays overlap instead of adding up, and order is kept since one
// goroutine writes the chunks in the order they were read. When src ends,
// the chunks still queued are delivered before f is closed; when f is
// closed first, they are dropped. A blackholed f is closed once both of
// its sources ended.
func (p *Proxy) pipe(f *forward, src, dst net.Conn) {
	defer p.wg.Done()
	queue := make(chan chunk, queueLen)
	p.wg.Add(1)
	go p.read(f, src, queue)
	failed := false
	for c := range queue {
		if failed {
			continue // dst is broken; drain until src ends too
		}
		if !f.wait(c.due) || !p.flowing(f) {
			return
		}
		if f.lost.Load() {
			continue // blackholed: the bytes are lost
		}
		if _, err := dst.Write(c.data); err != nil {
			failed = true
		}
	}
	if f.lost.Load() && f.ended.Add(1) < 2 {
		// A blackholed peer's close is lost too: the other peer keeps
		// its connection until it closes it as well.
		return
	}
	f.close(false)
}

func (p *Proxy) read(f *forward, src net.Conn, queue chan<- chunk) {
	defer p.wg.Done()
	defer close(queue)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c := chunk{bytes.Clone(buf[:n]), time.Now().Add(time.Duration(p.latency.Load()))}
			select {
			case queue <- c:
			case <-f.ctx.Done():
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A forward is one accepted connection and its connection to the target.
type forward struct {
	client net.Conn
	ctx    context.Context // done once the forward is closed
	cancel context.CancelFunc
	lost   atomic.Bool  // blackholed: bytes are read and dropped
	ended  atomic.Int32 // pipes whose source ended while lost

	mu       sync.Mutex
	upstream net.Conn // nil until dialed
	closed   bool
}

// attach sets the connection to the target, or closes it when f was
// closed while dialing.
func (f *forward) attach(up net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		up.Close()
		return false
	}
	f.upstream = up
	return true
}

// close closes both connections and stops f's pipes; with rst, the peers
// see a reset rather than an orderly close. Later calls do nothing.
func (f *forward) close(rst bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	f.cancel()
	for _, c := range []net.Conn{f.client, f.upstream} {
		switch {
		case c == nil:
		case rst:
			reset(c)
		default:
			c.Close()
		}
	}
}

// wait returns once due has come, true, or once f is closed, false.
func (f *forward) wait(due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return f.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// reset closes c with a TCP RST instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
