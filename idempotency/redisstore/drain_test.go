package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestShutdownReleasesADetachedClaim: a Claim whose context ends while
// its script is on its way to Redis (a client with ContextTimeoutEnabled,
// 300 ms away; the request's deadline 50 ms) returns, and its script runs
// on; then the server has shut down, and the process closes the client,
// the usual shutdown. Closed under the script's read, the client lost the
// answer (go-redis logged "Unexpected conn[N] state changed by hook to
// CLOSED"), so the claim made for the caller that left was never
// released: the key stayed held, every retry answered "in progress", for
// the whole lease (20 s). Draining the Store before closing the client
// waits for the script and the claim's release.
func TestShutdownReleasesADetachedClaim(t *testing.T) {
	const (
		lease   = 20 * time.Second // how long the key stayed held
		latency = 300 * time.Millisecond
		ends    = 50 * time.Millisecond // the caller's deadline
	)
	logged := captureRedisLog(t)
	direct, rdb, prefix := newStore(t)
	opt := *rdb.Options()
	proxy := testenv.StartProxy(t, opt.Addr)
	opt.Addr, opt.ContextTimeoutEnabled = proxy.Addr(), true
	far := redis.NewClient(&opt)
	s := redisstore.New(far, redisstore.WithPrefix(prefix))
	ctx := context.Background()
	// A first claim opens the connection and loads the script, so that
	// the claim below sends its EVALSHA at once.
	mustClaim(t, s, idempotency.Key{Key: "warm"}, "fp", lease, time.Hour)

	proxy.SetLatency(latency)
	k := idempotency.Key{Key: "k"}
	cctx, cancel := context.WithTimeout(ctx, ends)
	_, err := s.Claim(cctx, k, "fp", lease, time.Hour)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim whose deadline came before its answer = %v; want the deadline's error", err)
	}

	// The server's Shutdown returned: the process drains the Store and
	// closes its client.
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	if err := s.Drain(dctx); err != nil {
		t.Fatalf("Drain = %v; want nil once the detached claim was released", err)
	}
	if err := far.Close(); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, "the claim script has run", func() bool {
		n, err := rdb.Exists(ctx, entryName(prefix, k.Key)).Result()
		return err == nil && n == 1
	})
	r, err := direct.Claim(ctx, k, "fp", lease, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Acquired {
		t.Errorf("a retry after the shutdown finds the key %v (lease left %v of %v); want the claim of the caller that left released",
			r.Entry.State, r.Entry.LeaseRemaining.Round(time.Second), lease)
	}
	if lines := logged(); len(lines) > 0 {
		t.Errorf("go-redis logged %q; want nothing (no operation of the Store's on the closed client)", lines)
	}
}

// captureRedisLog sends go-redis's log to a buffer until the end of tb,
// whose lines it returns, and to stderr after that (go-redis's own logger
// cannot be had back). The tests of the package run one at a time, so
// the lines are tb's.
func captureRedisLog(tb testing.TB) func() []string {
	l := &capturedLog{on: true, out: log.New(os.Stderr, "redis: ", log.LstdFlags)}
	redis.SetLogger(l)
	tb.Cleanup(func() {
		l.mu.Lock()
		l.on = false
		l.mu.Unlock()
	})
	return func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		return append([]string(nil), l.lines...)
	}
}

// capturedLog is go-redis's logger while a test captures it.
type capturedLog struct {
	mu    sync.Mutex
	on    bool
	lines []string
	out   *log.Logger
}

func (l *capturedLog) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.on {
		l.out.Printf(format, v...)
		return
	}
	l.lines = append(l.lines, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
