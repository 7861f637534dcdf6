package pgstore_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// trackedConn is a connection dialled for the LISTEN connection's
// config, which records its Close.
type trackedConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestCloseAfterAReplacedListenConnection checks Close's promise to close
// the connections the Store opened itself also after a LISTEN connection
// was given up for dead (see watchset.PingWait): once Close returns, every
// connection dialled for it is closed within a moment. The dead one was
// left open for 15 s: its ping timed out, so pgx ended it in a goroutine
// of its own, which waits up to 15 s for the server's answer to a
// Terminate, and the listener's own Close then found it already closing
// and returned at once.
func TestCloseAfterAReplacedListenConnection(t *testing.T) {
	const idle = 100 * time.Millisecond
	pool := newPool(t)
	lc, p := proxiedConfig(t, pool)
	var (
		mu    sync.Mutex
		conns []*trackedConn
	)
	dial := lc.DialFunc
	lc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, closed: make(chan struct{})}
		mu.Lock()
		conns = append(conns, tc)
		mu.Unlock()
		return tc, nil
	}
	s := newStore(t, pool, pgstore.WithListenConfig(lc))
	pgstore.SetWatchIdle(s, idle)

	_, settled := claimAndWatch(t, s, p, key("replaced"))
	p.Blackhole()
	// The new connection's start wakes every waiter.
	select {
	case <-settled:
	case <-time.After(20 * idle):
		t.Fatal("the dead LISTEN connection was not replaced")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	const bound = 2 * time.Second
	deadline := time.After(bound)
	mu.Lock()
	all := append([]*trackedConn(nil), conns...)
	mu.Unlock()
	for i, c := range all {
		select {
		case <-c.closed:
		case <-deadline:
			t.Fatalf("connection %d of the %d dialled for the LISTEN connection still open %v after Close", i+1, len(all), bound)
		}
	}
}
