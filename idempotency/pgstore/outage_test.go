package pgstore_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// poolAt returns a pool on the test database reached through addr.
func poolAt(t *testing.T, addr string) *pgxpool.Pool {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	return newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.Host = host
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			t.Fatal(err)
		}
		c.ConnConfig.Port = uint16(p)
		c.ConnConfig.ConnectTimeout = 2 * time.Second
		c.ConnConfig.Fallbacks = nil
	})
}

func TestOutageWrongPortAnswers503(t *testing.T) {
	good := newPool(t)
	table := uniqueTable(t, good)
	if err := pgstore.New(good, pgstore.WithTable(table)).CreateSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	bad := poolAt(t, freeAddr(t))
	stores := map[string]idempotency.Store{
		"lease": pgstore.New(bad, pgstore.WithTable(table)),
		"tx":    pgstore.NewTx(bad, pgstore.WithTable(table)),
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			h := &orderHandler{pool: good, table: "unused", who: "a"}
			r := post(ctxT(t), instance(t, s, h).URL, "k-"+name, `{}`)
			if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" ||
				!strings.Contains(r.body, idempotency.ProblemStoreUnavailable) {
				t.Fatalf("reply = %+v, want 503 store unavailable with Retry-After", r)
			}
			if h.runs.Load() != 0 {
				t.Fatal("the handler ran while the store was unreachable")
			}
		})
	}
}

// proxy forwards TCP connections from a loopback port to PostgreSQL; it can
// be stopped (dropping every connection) and started again on the same port,
// standing for a database outage without touching the shared server.
type proxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	p.start("127.0.0.1:0")
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatalf("proxy listen: %v", err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			if !p.track(c, up) {
				return
			}
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// stop closes the listener and every connection, and waits for the copiers.
func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func TestOutageRecoversWhenTheDatabaseIsBack(t *testing.T) {
	good := newPool(t)
	cc := good.Config().ConnConfig
	target := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	for _, mode := range []string{"lease", "tx"} {
		t.Run(mode, func(t *testing.T) {
			table := uniqueTable(t, good)
			if err := pgstore.New(good, pgstore.WithTable(table)).CreateSchema(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			orders := ordersTable(t, good, table)
			p := startProxy(t, target)
			viaProxy := poolAt(t, p.addr)
			var s idempotency.Store = pgstore.New(viaProxy, pgstore.WithTable(table))
			if mode == "tx" {
				s = pgstore.NewTx(viaProxy, pgstore.WithTable(table))
			}
			h := &orderHandler{pool: good, table: orders, who: "a"}
			url := instance(t, s, h).URL
			ctx := ctxT(t)
			if r := post(ctx, url, "before", `{}`); r.status != 201 {
				t.Fatalf("before the outage: %+v", r)
			}
			p.stop()
			for range 3 {
				r := post(ctx, url, "during", `{}`)
				if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
					t.Fatalf("during the outage: %+v, want 503 with Retry-After", r)
				}
			}
			if h.runs.Load() != 1 {
				t.Fatalf("handler runs = %d during the outage, want none beyond the first", h.runs.Load())
			}
			p.start(p.addr)
			var r reply
			eventually(t, "requests succeed again", func() bool {
				r = post(ctx, url, "during", `{}`)
				return r.status != http.StatusServiceUnavailable
			})
			if r.err != nil || r.status != 201 || h.runs.Load() != 2 {
				t.Fatalf("after the outage: %+v, runs %d", r, h.runs.Load())
			}
			if r := post(ctx, url, "before", `{}`); r.status != 201 || r.header.Get(idempotency.HeaderReplayed) != "true" {
				t.Fatalf("replay after the outage: %+v", r)
			}
		})
	}
}
