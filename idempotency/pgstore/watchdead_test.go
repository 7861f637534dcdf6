package pgstore_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

// listenThroughProxy returns a store whose LISTEN connection (and only
// it: the pool connects directly) goes through a proxy of the test's own,
// and waits idle for a notification before it checks on its connection.
func listenThroughProxy(t *testing.T, idle time.Duration) (*pgstore.Store, *testenv.Proxy) {
	t.Helper()
	pool := newPool(t)
	lc, p := proxiedConfig(t, pool)
	s := newStore(t, pool, pgstore.WithListenConfig(lc))
	pgstore.SetWatchIdle(s, idle)
	return s, p
}

// proxiedConfig returns a copy of pool's connection config that connects
// through a proxy of the test's own to the same server, and the proxy.
func proxiedConfig(t *testing.T, pool *pgxpool.Pool) (*pgx.ConnConfig, *testenv.Proxy) {
	t.Helper()
	cc := pool.Config().ConnConfig
	p := testenv.StartProxy(t, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	lc := cc.Copy()
	host, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.Atoi(port)
	lc.Host, lc.Port = host, uint16(n)
	return lc, p
}

// claimAndWatch claims k on s, watches it, and waits until the LISTEN
// connection is up.
func claimAndWatch(t *testing.T, s *pgstore.Store, p *testenv.Proxy, k idempotency.Key) (idempotency.ClaimResult, <-chan struct{}) {
	t.Helper()
	ctx := ctxT(t)
	c, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !c.Acquired {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	settled, stop, err := s.Watch(ctx, k)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(stop)
	testenv.Eventually(t, "the LISTEN connection is up", func() bool { return p.Conns() == 1 })
	return c, settled
}

// TestWatchSurvivesASilentlyDeadListenConnection: the LISTEN connection
// dies without a reset or a close (a NAT or firewall forgets it, a host is
// partitioned away): its notifications are lost, and neither pgx nor the
// kernel (whose keepalives the proxy's socket answers, as any TCP proxy or
// load balancer would) report anything. A request waiting meanwhile must
// still be woken once its entry settles, within a few of the listener's
// idle periods, by a watcher that noticed the dead connection and
// listens on a new one. It was never woken while anybody waited (the
// listener went on waiting on the dead connection, and only left it after
// a whole idle period with nobody waiting), so waiters fell back on their
// once-a-second poll for as long as the load lasted.
func TestWatchSurvivesASilentlyDeadListenConnection(t *testing.T) {
	const idle = 200 * time.Millisecond
	s, p := listenThroughProxy(t, idle)
	k := key("dead")
	c, settled := claimAndWatch(t, s, p, k)
	if n := p.Blackhole(); n != 1 {
		t.Fatalf("Blackhole = %d, want the LISTEN connection alone", n)
	}
	if err := s.Complete(ctxT(t), k, c.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	completed := time.Now()
	const limit = 20 * idle
	select {
	case <-settled:
		t.Logf("woken %v after the completion", time.Since(completed))
	case <-time.After(limit):
		t.Fatalf("the waiter was not woken within %v of the completion (idle period %v): the dead LISTEN connection went unnoticed", limit, idle)
	}

	// Later notifications come through the new connection.
	testkit.CompletionWakes(t, ctxT(t), s, s, key("after"), idle)
}
