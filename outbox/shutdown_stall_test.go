package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// stallPool returns an Outbox like o on a pool of maxConns connections
// that reach the database through a proxy, each connection open already
// (so that a pipelined worker gets its second one at once), and the proxy:
// SetLatency(time.Hour) makes the database stop answering.
func stallPool(t *testing.T, o *outbox.Outbox, maxConns int32) (*outbox.Outbox, *testenv.Proxy) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.Addr())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the proxy's Stop (cleanups run last first)
	var warm []*pgxpool.Conn
	for range maxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		warm = append(warm, c)
	}
	for _, c := range warm {
		c.Release()
	}
	table := o.Table()
	return outbox.New(pool, outbox.WithTable(table[1:len(table)-1])), proxy
}

// runUntilStopped runs r until the test ends (then it stops the proxy, so
// that nothing outlives the test) and returns Run's context's cancel and a
// channel closed when Run returns.
func runUntilStopped(t *testing.T, r *outbox.Relay, proxy *testenv.Proxy) (context.CancelFunc, <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		proxy.Stop()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return even after the proxy stopped")
		}
	})
	return cancel, done
}

// A relay stopped while its batch is in Publish, with the database no
// longer answering, returns its settle timeout (WithSettleTimeout) after
// its context ended, whatever Publish answers: the statements that end the
// batch's transaction are bounded as those that mark it.
func TestRunReturnsWhenTheDatabaseStallsAtShutdown(t *testing.T) {
	const settle = 500 * time.Millisecond
	answers := []struct {
		name   string
		answer func(ctx context.Context) error
	}{
		{"published", func(context.Context) error { return nil }},
		{"partial", func(ctx context.Context) error { return &outbox.PublishError{Index: 1, Err: ctx.Err()} }},
		{"failed", func(ctx context.Context) error { return errors.Join(errors.New("broker"), ctx.Err()) }},
	}
	for _, conns := range []int32{1, 4} {
		for _, a := range answers {
			t.Run(fmt.Sprintf("conns=%d/%s", conns, a.name), func(t *testing.T) {
				o, pool := newOutbox(t)
				enqueue(t, pool, o, msg("m1", "k"), msg("m2", "k"))
				op, proxy := stallPool(t, o, conns)
				entered := make(chan struct{}, 1)
				pub := publisherFunc(func(ctx context.Context, _ []outbox.Message) error {
					entered <- struct{}{}
					<-ctx.Done()
					return a.answer(ctx)
				})
				cancel, done := runUntilStopped(t, op.Relay(pub, outbox.WithListen(false), outbox.WithSettleTimeout(settle)), proxy)
				select {
				case <-entered:
				case <-time.After(10 * time.Second):
					t.Fatal("the relay did not publish")
				}
				proxy.SetLatency(time.Hour)
				start := time.Now()
				cancel()
				select {
				case <-done:
					t.Logf("Run returned %v after its context ended", time.Since(start).Round(10*time.Millisecond))
				case <-time.After(settle + 2*time.Second): // the default bound is 5 s
					t.Errorf("Run had not returned %v after its context ended, the database not answering", settle+2*time.Second)
				}
			})
		}
	}
}

// publisherFunc is a Publisher made of a function.
type publisherFunc func(ctx context.Context, msgs []outbox.Message) error

func (f publisherFunc) Publish(ctx context.Context, msgs []outbox.Message) error { return f(ctx, msgs) }

// The bound is one for the whole Run, counted from the end of its
// context: a pipelined worker marks the batch before the one in Publish
// (on the other connection, under a context made before the end) and then
// the one in Publish (after the end); with the database not answering,
// both end the settle timeout after Run's context did, not one after the
// other.
func TestPipelinedShutdownHasOneBound(t *testing.T) {
	const settle = 2 * time.Second
	o, pool := newOutbox(t)
	enqueue(t, pool, o, msg("m1", "a"), msg("m2", "b"), msg("m3", "c"), msg("m4", "d"))
	op, proxy := stallPool(t, o, 4) // pipelined
	entered := make(chan struct{}, 1)
	var mu sync.Mutex
	calls := 0
	pub := publisherFunc(func(ctx context.Context, _ []outbox.Message) error {
		mu.Lock()
		calls++
		call := calls
		mu.Unlock()
		switch call {
		case 1: // batch 1, published; batch 2 is claimed meanwhile
			time.Sleep(300 * time.Millisecond)
			proxy.SetLatency(time.Hour) // before batch 1's marks go out
			return nil
		case 2: // batch 2, in Publish when the relay stops
			entered <- struct{}{}
			<-ctx.Done()
			return &outbox.PublishError{Index: 1, Err: ctx.Err()}
		}
		return ctx.Err()
	})
	cancel, done := runUntilStopped(t, op.Relay(pub, outbox.WithListen(false), outbox.WithBatchSize(1), outbox.WithSettleTimeout(settle)), proxy)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not publish batch 2")
	}
	start := time.Now()
	cancel()
	const limit = settle * 7 / 4 // two bounds one after the other take 2*settle
	select {
	case <-done:
		t.Logf("Run returned %v after its context ended", time.Since(start).Round(10*time.Millisecond))
	case <-time.After(limit):
		<-done
		t.Errorf("Run returned %v after its context ended, the database not answering; want about %v",
			time.Since(start).Round(10*time.Millisecond), settle)
	}
}

// RunOnce keeps the same bound: ended while its batch is in Publish, with
// the database no longer answering, it returns its settle timeout after
// its context ended, not the default 5 s.
func TestRunOnceReturnsWithinItsSettleTimeout(t *testing.T) {
	const settle = 500 * time.Millisecond
	o, pool := newOutbox(t)
	enqueue(t, pool, o, msg("m1", "k"))
	op, proxy := stallPool(t, o, 1)
	t.Cleanup(proxy.Stop)
	entered := make(chan struct{}, 1)
	pub := publisherFunc(func(ctx context.Context, _ []outbox.Message) error {
		entered <- struct{}{}
		<-ctx.Done()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = op.Relay(pub, outbox.WithListen(false), outbox.WithSettleTimeout(settle)).RunOnce(ctx)
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("RunOnce did not publish")
	}
	proxy.SetLatency(time.Hour)
	start := time.Now()
	cancel()
	select {
	case <-done:
		t.Logf("RunOnce returned %v after its context ended", time.Since(start).Round(10*time.Millisecond))
	case <-time.After(settle + 2*time.Second):
		proxy.Stop()
		<-done
		t.Errorf("RunOnce returned %v after its context ended, the database not answering; want about %v",
			time.Since(start).Round(10*time.Millisecond), settle)
	}
}
