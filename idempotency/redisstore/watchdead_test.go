package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestWatchSurvivesASilentlyDeadSubscription: the subscription's
// connection dies without a reset or a close (a NAT or firewall forgets
// it, a host is partitioned away): the messages published on it are
// lost, and neither go-redis (a read timeout is no broken connection to
// it) nor the kernel (whose keepalives the proxy's socket answers, as any
// TCP proxy or load balancer would) report anything. A request waiting
// meanwhile must still be woken once its entry settles, within a few of
// the listener's idle periods, by a watcher that noticed the dead
// connection and subscribes on a new one. It was never woken while
// anybody waited (the listener went on reading the dead connection, and
// only left it after a whole idle period with nobody waiting), so
// waiters fell back on their once-a-second poll for as long as the load
// lasted.
func TestWatchSurvivesASilentlyDeadSubscription(t *testing.T) {
	const idle = 200 * time.Millisecond
	direct := newClient(t)
	prefix := newPrefix(t, direct)
	settler := redisstore.New(direct, redisstore.WithPrefix(prefix))

	p := testenv.StartProxy(t, redisOptions(t).Addr)
	opt := redisOptions(t)
	opt.Addr = p.Addr()
	// The blackholed pooled connection fails its next command after
	// this, and go-redis retries it on a new one.
	opt.ReadTimeout = 500 * time.Millisecond
	proxied := redis.NewClient(opt)
	t.Cleanup(func() { proxied.Close() })
	s := redisstore.New(proxied, redisstore.WithPrefix(prefix))
	redisstore.SetWatchIdle(s, idle)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := idempotency.Key{Scope: "s", Key: "dead"}
	c, err := settler.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !c.Acquired {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	settled, stop, err := s.Watch(ctx, k)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stop()
	// The mark's pooled connection and the subscription's own.
	testenv.Eventually(t, "the subscription is up", func() bool { return p.Conns() == 2 })
	p.Blackhole()
	if err := settler.Complete(ctx, k, c.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	completed := time.Now()
	const limit = 20 * idle
	select {
	case <-settled:
		t.Logf("woken %v after the completion", time.Since(completed))
	case <-time.After(limit):
		t.Fatalf("the waiter was not woken within %v of the completion (idle period %v): the dead subscription went unnoticed", limit, idle)
	}

	// Later messages come through the new connection.
	testkit.CompletionWakes(t, ctx, s, settler, idempotency.Key{Scope: "s", Key: "after"}, idle)
}
