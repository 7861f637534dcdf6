package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/tcpproxy"
	"github.com/saferetry/saferetry/mockserver"
)

// Scenario names: which faults a run fires.
const (
	ScenarioMock  = "mock-faults" // drop-after-commit and 503 bursts, the mock server's own
	ScenarioKill  = "kill"        // kill -9 of a random instance every 1-3 s, then a restart
	ScenarioPause = "pause"       // SIGSTOP of a random instance for 1.5 leases, then SIGCONT
	ScenarioStore = "store"       // Redis killed and restarted; PostgreSQL connections cut and slowed
	ScenarioAll   = "all"         // all of the above at once
	// ScenarioRenew fires the mock faults while every payment works one and
	// a half leases after paying: a claim holds only while its instance
	// renews it, and no fault lets a lease lapse, so the unkeyed handler
	// must not pay twice (see Result.OK).
	ScenarioRenew = "renew"
)

// Scenarios lists the scenarios of the keyed cells, in the order the
// tables show them. ScenarioRenew is the unkeyed handler's, beside
// ScenarioAll; a keyed cell runs it only when named.
var Scenarios = []string{ScenarioMock, ScenarioKill, ScenarioPause, ScenarioStore, ScenarioAll}

// lapses reports whether scenario fires faults that let a live claim's
// lease lapse (a kill, a pause, a store fault), after which a takeover
// runs the handler again: the unkeyed handler's doubles are allowed only
// under those.
func lapses(scenario string) bool {
	return scenario != ScenarioMock && scenario != ScenarioRenew
}

// fired counts the faults a run fired, by kind.
type fired struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *fired) add(kind string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[kind] += n
}

func (f *fired) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := 0
	for _, v := range f.n {
		t += v
	}
	return t
}

// String lists the counts as "kill=3 pause=2", sorted by kind.
func (f *fired) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds := make([]string, 0, len(f.n))
	for k := range f.n {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s=%d", k, f.n[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// cluster is what the faults act on: the instances, and the store behind
// them (a Redis process of the suite's own, or a proxy to PostgreSQL).
type cluster struct {
	instances []*proc
	addrs     []string
	redis     *proc           // nil for PostgreSQL
	proxy     *tcpproxy.Proxy // nil for Redis
	busy      []sync.Mutex    // one fault at a time per instance
	armedMu   sync.Mutex
	armed     map[int]map[string]int // mock faults armed on an instance's process and not yet counted, by kind
	admin     *http.Client
	fired     fired
	lease     time.Duration
	patience  time.Duration // bounds a restart; 0 means restartPatience
	logf      func(string, ...any)
	cleanups  []func() // run by close, last first
}

// between waits a random time in [lo, hi), or returns false when ctx ends.
func between(ctx context.Context, lo, hi time.Duration) bool {
	d := lo + time.Duration(rand.Int64N(int64(hi-lo)))
	return clock.Sleep(ctx, clock.Real, d) == nil
}

// pick locks a random instance that no other fault holds, or returns -1.
func (c *cluster) pick() int {
	start := rand.IntN(len(c.instances))
	for i := range c.instances {
		n := (start + i) % len(c.instances)
		if c.busy[n].TryLock() {
			return n
		}
	}
	return -1
}

// restart starts instance i again, retrying while its store is down.
func (c *cluster) restart(ctx context.Context, i int) {
	for ctx.Err() == nil {
		err := c.instances[i].start(ctx)
		if err == nil {
			return
		}
		c.logf("chaos: restarting %s: %v; trying again", c.instances[i].name, err)
		if !between(ctx, 200*time.Millisecond, 400*time.Millisecond) {
			return
		}
	}
}

// run fires the faults of scenario until ctx ends.
func (c *cluster) run(ctx context.Context, scenario string) *sync.WaitGroup {
	var wg sync.WaitGroup
	loop := func(f func(ctx context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				f(ctx)
			}
		}()
	}
	all := scenario == ScenarioAll
	if all || scenario == ScenarioMock || scenario == ScenarioRenew {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c.mockFaults(ctx)
			}
			// What the instances still hold pending has not fired; it is
			// dropped, so that it cannot fire uncounted in the final round.
			for i := range c.instances {
				c.busy[i].Lock()
				c.countMockFaults(i, true)
				c.busy[i].Unlock()
			}
		}()
	}
	if all || scenario == ScenarioKill {
		loop(c.kill)
	}
	if all || scenario == ScenarioPause {
		loop(c.pause)
	}
	if all || scenario == ScenarioStore {
		if c.redis != nil {
			loop(c.restartRedis)
		} else {
			loop(c.cutPostgres)
			loop(c.slowPostgres)
		}
	}
	return &wg
}

// mockFaults asks a random instance to drop the answer of its next
// executions after commit, or to fail its next requests with 503. Those
// are armed, not fired: countMockFaults counts the ones the instance took.
// The instance is held like for any other fault, so that no kill comes
// between the arming and its record.
func (c *cluster) mockFaults(ctx context.Context) {
	if !between(ctx, 100*time.Millisecond, 300*time.Millisecond) {
		return
	}
	i := c.pick()
	if i < 0 {
		return
	}
	defer c.busy[i].Unlock()
	n := 1 + rand.IntN(2)
	path, kind, body := "drop-after-commit", "drop", fmt.Sprintf(`{"count":%d}`, n)
	if rand.IntN(2) == 0 {
		n = 1 + rand.IntN(4)
		path, kind, body = "fail", "503", fmt.Sprintf(`{"count":%d,"status":503}`, n)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.addrs[i]+mockserver.AdminPrefix+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return
	}
	resp, err := c.admin.Do(req)
	if err != nil {
		return // the instance is down: nothing armed
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		c.armedMu.Lock()
		defer c.armedMu.Unlock()
		if c.armed == nil {
			c.armed = map[int]map[string]int{}
		}
		if c.armed[i] == nil {
			c.armed[i] = map[string]int{}
		}
		c.armed[i][kind] += n
	}
}

// countMockFaults counts as fired the mock faults armed on instance i's
// process that it no longer holds pending, and forgets them; with clear,
// it also drops those still pending. The caller holds busy[i]. An instance
// that does not say what it holds counts none of them: the count of faults
// fired is a lower bound, never a count of faults armed.
func (c *cluster) countMockFaults(i int, clear bool) {
	c.armedMu.Lock()
	armed := c.armed[i]
	delete(c.armed, i)
	c.armedMu.Unlock()
	if len(armed) == 0 {
		return
	}
	url := "http://" + c.addrs[i] + mockserver.AdminPrefix + "faults"
	do := func(method string, into any) error {
		_, err := callJSON(context.Background(), c.admin, method, url, into)
		return err
	}
	var pending mockserver.Faults
	if err := do(http.MethodGet, &pending); err != nil {
		c.logf("chaos: reading the faults pending on %s: %v; none of %v counted as fired", c.instances[i].name, err, armed)
		return
	}
	if n := armed["drop"] - pending.DropAfterCommit; n > 0 {
		c.fired.add("drop", n)
	}
	if n := armed["503"] - len(pending.Fail); n > 0 {
		c.fired.add("503", n)
	}
	if clear {
		if err := do(http.MethodDelete, &pending); err != nil {
			c.logf("chaos: clearing the faults pending on %s: %v", c.instances[i].name, err)
		}
	}
}

// kill kills a random instance with SIGKILL and restarts it shortly after.
func (c *cluster) kill(ctx context.Context) {
	if !between(ctx, time.Second, 3*time.Second) {
		return
	}
	i := c.pick()
	if i < 0 {
		return
	}
	defer c.busy[i].Unlock()
	c.countMockFaults(i, false) // what it holds pending dies with it
	// An instance that is down already (it crashed, or its restart failed)
	// is not killed: no fault fires, and it is started again.
	if c.instances[i].kill() {
		c.fired.add("kill", 1)
	}
	between(ctx, 100*time.Millisecond, 600*time.Millisecond)
	// Restarted even when the run ends, within a bound.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.restartWithin())
	defer cancel()
	c.restart(rctx, i)
}

// restartPatience bounds the restart of a killed process, unless the
// cluster's patience says otherwise.
const restartPatience = 30 * time.Second

// restartWithin is how long a restart may take.
func (c *cluster) restartWithin() time.Duration {
	if c.patience > 0 {
		return c.patience
	}
	return restartPatience
}

// pause stops a random instance with SIGSTOP for longer than the lease,
// so that another instance may take its claims over, then continues it.
func (c *cluster) pause(ctx context.Context) {
	if !between(ctx, 2*time.Second, 4*time.Second) {
		return
	}
	i := c.pick()
	if i < 0 {
		return
	}
	defer c.busy[i].Unlock()
	if !c.instances[i].pause() {
		return
	}
	c.fired.add("pause", 1)
	t := time.NewTimer(pauseFor(c.lease))
	<-t.C // resumed even when the run ends: a paused process must not stay
	c.instances[i].resume()
}

// pauseFor is how long the pause fault stops an instance whose lease is
// lease: past the lease, so that its claims may be taken over.
func pauseFor(lease time.Duration) time.Duration { return lease * 3 / 2 }

// restartRedis kills the suite's Redis with SIGKILL and starts it again
// from its append-only file.
func (c *cluster) restartRedis(ctx context.Context) {
	if !between(ctx, 3*time.Second, 6*time.Second) {
		return
	}
	if c.redis.kill() {
		c.fired.add("redis-restart", 1)
	}
	between(ctx, 200*time.Millisecond, 600*time.Millisecond)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.restartWithin())
	defer cancel()
	for rctx.Err() == nil {
		err := c.redis.start(rctx)
		if err == nil {
			return
		}
		c.logf("chaos: restarting %s: %v; trying again", c.redis.name, err)
		between(rctx, 200*time.Millisecond, 400*time.Millisecond)
	}
}

// cutPostgres resets every connection between the instances and
// PostgreSQL, as a network cut would.
func (c *cluster) cutPostgres(ctx context.Context) {
	if !between(ctx, 2*time.Second, 4*time.Second) {
		return
	}
	if n := c.proxy.Cut(); n > 0 {
		c.fired.add("pg-cut", 1)
	}
}

// slowPostgres adds latency to the instances' PostgreSQL traffic for a
// second at a time.
func (c *cluster) slowPostgres(ctx context.Context) {
	if !between(ctx, 2*time.Second, 5*time.Second) {
		return
	}
	c.proxy.SetLatency(c.lease / 20)
	c.fired.add("pg-slow", 1)
	between(ctx, 500*time.Millisecond, 1500*time.Millisecond)
	c.proxy.SetLatency(0)
}

// heal brings every instance and the store back, for the final round,
// within its restart patience, and returns an error naming what did not come
// back by then (a store that does not start, an instance that dies at
// every start): that is left down, and the final round retries on the
// others, rather than the cell waiting for it until the whole run's time
// is up.
func (c *cluster) heal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.restartWithin())
	defer cancel()
	if c.proxy != nil {
		c.proxy.SetLatency(0)
	}
	var errs []error
	if c.redis != nil && !c.redis.alive() {
		if err := c.redis.start(ctx); err != nil {
			errs = append(errs, fmt.Errorf("chaos: %s did not come back for the final round: %w", c.redis.name, err))
		}
	}
	for i, in := range c.instances {
		in.resume()
		if !in.alive() {
			c.restart(ctx, i)
			if !in.alive() {
				errs = append(errs, fmt.Errorf("chaos: %s did not come back for the final round (see %s)", in.name, in.log))
			}
		}
	}
	return errors.Join(errs...)
}
