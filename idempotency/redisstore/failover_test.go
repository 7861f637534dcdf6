package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// ownCluster is a Redis Cluster of one test's own, started by
// .ci/redis-cluster.sh on free ports (see testenv.FreePorts) and stopped
// when the test ends.
type ownCluster struct {
	t           *testing.T
	script      string
	dir         string
	addrs       []string
	nodeTimeout time.Duration // cluster-node-timeout
}

func startOwnCluster(t *testing.T) *ownCluster {
	t.Helper()
	return startOwnClusterTimeout(t, time.Second)
}

// startOwnClusterTimeout is startOwnCluster with cluster-node-timeout
// nodeTimeout: how long a node may not answer before it is failed over.
func startOwnClusterTimeout(t *testing.T, nodeTimeout time.Duration) *ownCluster {
	t.Helper()
	return startOwnClusterPicking(t, nodeTimeout, func() int { return testenv.FreePorts(t, 6, true) })
}

// startOwnClusterPicking is startOwnClusterTimeout with the first of each
// try's six ports from pick.
func startOwnClusterPicking(t *testing.T, nodeTimeout time.Duration, pick func() int) *ownCluster {
	t.Helper()
	for _, bin := range []string{"bash", "redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, bin+" is not on PATH; install it to run this test")
		}
	}
	script, err := filepath.Abs("../../.ci/redis-cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	c := &ownCluster{t: t, script: script, dir: filepath.Join(t.TempDir(), "cluster"), nodeTimeout: nodeTimeout}
	t.Cleanup(func() { c.run("stop", c.dir) })
	// The ports are free when picked, not held: another process may bind
	// one first (the script then stops what it started). Three picks.
	for try := 1; ; try++ {
		base := pick()
		out, err := c.tryRun("start", c.dir, strconv.Itoa(base))
		if err == nil {
			c.addrs = strings.Split(out, ",")
			return c
		}
		if try == 3 || !portTaken(err) {
			t.Fatal(err)
		}
		t.Logf("a port of %d-%d was taken before its node bound it; picking others: %v", base, base+5, err)
	}
}

// portTaken reports whether err, from redis-cluster.sh, says a port it
// was to listen on was taken.
func portTaken(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Address already in use") || strings.Contains(s, "already listens on port")
}

// run runs the script with args and returns what it printed; it fails the
// test when the script fails.
func (c *ownCluster) run(args ...string) string {
	c.t.Helper()
	out, err := c.tryRun(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// tryRun runs the script with args and returns what it printed, or an
// error that holds what it said on stderr.
func (c *ownCluster) tryRun(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{c.script}, args...)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("NODE_TIMEOUT=%d", c.nodeTimeout.Milliseconds()))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("redis-cluster.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// kill9 sends SIGKILL to the node at addr.
func (c *ownCluster) kill9(addr string) {
	c.t.Helper()
	c.signal(addr, syscall.SIGKILL)
}

// signal sends sig to the node at addr.
func (c *ownCluster) signal(addr string, sig syscall.Signal) {
	c.t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	b, err := os.ReadFile(filepath.Join(c.dir, port, "redis.pid"))
	if err != nil {
		c.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		c.t.Fatalf("kill -%v %d (%s): %v", sig, pid, addr, err)
	}
}

// restart starts the node at addr again from its own files.
func (c *ownCluster) restart(addr string) {
	c.t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	c.run("node", c.dir, port)
}

// replicationInfo returns field of INFO replication on the node at addr,
// "" when the node does not answer.
func replicationInfo(addr, field string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	s, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// Failover test parameters.
const (
	failoverDups      = 3                      // concurrent duplicates per send, one per instance
	failoverInFlight  = 24                     // operations in flight at most
	failoverRetry     = 100 * time.Millisecond // between a failed send and its retry
	failoverHold      = 20 * time.Millisecond  // each execution's run time
	failoverRecovered = 10 * time.Second       // the bound on service back after the promotion
)

// TestClusterFailover kills a primary of a cluster of the test's own with
// kill -9 while a retry storm (each operation sent by three instances at
// once, and sent again until it succeeds) runs through the middleware on
// three instances. No operation may run twice or lose its record, every
// operation must succeed in the end, and the failed primary's slots must
// serve again within failoverRecovered of the promotion: go-redis alone
// would keep dialling the dead node until its 60 s state reload. With
// WithWait(1, ...) the promoted primary has no replica, so its slots
// refuse claims (503) until the failed node, restarted, rejoins as its
// replica. The timeline is logged.
func TestClusterFailover(t *testing.T) {
	for _, w := range waitOptions {
		t.Run(w.name, func(t *testing.T) { failover(t, w.opts, len(w.opts) > 0) })
	}
}

// failoverRun is one run's record: what ran, what every operation got.
type failoverRun struct {
	prefix string
	killed atomic.Int64 // Unix ns of the kill, 0 before

	mu       sync.Mutex
	execs    map[string]int       // key -> executions
	bodies   map[string]string    // key -> the body its execution sent
	answered map[string]string    // key -> the body of its 201s
	onVictim map[string]bool      // keys on the failed primary's slots
	firstOK  map[string]time.Time // key -> its first 201 to a send after the kill
	replies  []replyRecord
	mixed    []string // keys whose 201s disagreed
}

// replyRecord is one answer the storm got: when it was sent, how long it
// took, its status (0: none), whether its key is on the failed primary.
type replyRecord struct {
	sent     time.Time
	took     time.Duration
	status   int
	affected bool
}

// summary counts the answers by status, on the failed primary's slots and
// on the others, and counts the 503s on its slots sent in [from, to) and
// gives the longest of them.
func (f *failoverRun) summary(from, to time.Time) (affected, others map[int]int, n503 int, slowest503 time.Duration) {
	affected, others = map[int]int{}, map[int]int{}
	for _, r := range f.replies {
		if !r.affected {
			others[r.status]++
			continue
		}
		affected[r.status]++
		if r.status == http.StatusServiceUnavailable && !r.sent.Before(from) && r.sent.Before(to) {
			n503++
			slowest503 = max(slowest503, r.took)
		}
	}
	return affected, others, n503, slowest503
}

func (f *failoverRun) handler(inst int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(idempotency.HeaderIdempotencyKey)
		testenv.Pause(r.Context(), failoverHold)
		f.mu.Lock()
		f.execs[key]++
		body := fmt.Sprintf(`{"key":%q,"execution":%d,"instance":%d}`, key, f.execs[key], inst)
		f.bodies[key] = body
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, body)
	})
}

// operate sends key's duplicates to every instance at once, again every
// failoverRetry until one answers 201, or ctx ends.
func (f *failoverRun) operate(ctx context.Context, client *http.Client, urls []string, key string) bool {
	for ctx.Err() == nil {
		batch := time.Now()
		replies := make([]answer, failoverDups)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent := time.Now()
				replies[i] = testenv.Post(ctx, client, urls[i%len(urls)]+"/ops", key, `{"amount":1}`)
				took := time.Since(sent)
				status := replies[i].Status
				if replies[i].Err != nil {
					status = 0
				}
				f.mu.Lock()
				f.replies = append(f.replies, replyRecord{sent, took, status, f.onVictim[key]})
				f.mu.Unlock()
			}()
		}
		wg.Wait()
		now := time.Now()
		ok := false
		f.mu.Lock()
		for _, r := range replies {
			if r.Err != nil || r.Status != http.StatusCreated {
				continue
			}
			ok = true
			if prev, seen := f.answered[key]; seen && prev != r.Body {
				f.mixed = append(f.mixed, key)
			}
			f.answered[key] = r.Body
			if k := f.killed.Load(); k != 0 && batch.UnixNano() > k {
				if _, seen := f.firstOK[key]; !seen {
					f.firstOK[key] = now
				}
			}
		}
		f.mu.Unlock()
		if ok {
			return true
		}
		testenv.Pause(ctx, failoverRetry)
	}
	return false
}

// failover runs one failover of TestClusterFailover with a store built
// with opts; withWait says that they hold WithWait.
func failover(t *testing.T, opts []redisstore.Option, withWait bool) {
	c := startOwnCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	control := newClusterClient(t, c.addrs)
	f := &failoverRun{
		prefix: testenv.RandomName("saferetry:failover:") + ":",
		execs:  map[string]int{}, bodies: map[string]string{}, answered: map[string]string{},
		firstOK: map[string]time.Time{},
	}
	// Three instances, each with a cluster client of its own, with
	// go-redis's defaults (ClusterStateReloadInterval 60 s).
	var urls []string
	for i := range 3 {
		rdb := newClusterClient(t, c.addrs)
		store := redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(f.prefix)}, opts...)...)
		srv := httptest.NewServer(idempotency.Middleware(store)(f.handler(i)))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	client := newHTTPClientT(t)

	// The victim: the primary of slot 0, and its replica; which keys
	// fall on its slots.
	victim, replica, onVictim := primaryAndReplica(t, control, 0, f.prefix)
	f.onVictim = onVictim

	// The storm: operations started one after another, at most
	// failoverInFlight at once, until stop.
	var keys []string
	var failed atomic.Int64
	stop := make(chan struct{})
	stormDone := make(chan struct{})
	var stopOnce sync.Once
	stopStorm := func() {
		stopOnce.Do(func() { close(stop) })
		<-stormDone
	}
	// On every path, a failed check included, no operation outlives the
	// test.
	t.Cleanup(func() { cancel(); stopStorm() })
	go func() {
		defer close(stormDone)
		sem := make(chan struct{}, failoverInFlight)
		var wg sync.WaitGroup
		defer wg.Wait()
		for n := 0; n < failoverKeys; n++ {
			select {
			case <-stop:
				return
			case sem <- struct{}{}:
			}
			key := failoverKey(n)
			keys = append(keys, key)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if !f.operate(ctx, client, urls, key) {
					failed.Add(1)
				}
			}()
			testenv.Pause(ctx, 5*time.Millisecond)
		}
	}()

	testenv.Pause(ctx, 500*time.Millisecond)
	tKill := time.Now()
	f.killed.Store(tKill.UnixNano())
	c.kill9(victim)
	var tPromoted, tRestarted, tRejoined time.Time
	testenv.Eventually(t, "the replica "+replica+" is promoted", func() bool {
		if replicationInfo(replica, "role") == "master" {
			tPromoted = time.Now()
			return true
		}
		return false
	})
	if withWait {
		// WithWait: the promoted primary accepts no claim until it has a
		// replica again (503s meanwhile, not hangs); bring the failed
		// node back a second later, as a supervisor would.
		testenv.Pause(ctx, time.Second)
		tRestarted = time.Now()
		c.restart(victim)
		testenv.Eventually(t, "the restarted "+victim+" replicates "+replica, func() bool {
			if replicationInfo(victim, "master_link_status") == "up" {
				tRejoined = time.Now()
				return true
			}
			return false
		})
	}
	// Service is back when an operation of the victim's slots succeeds.
	affected := func(key string) bool { return onVictim[key] }
	var tBack time.Time
	deadline := tPromoted.Add(failoverRecovered)
	for tBack.IsZero() && time.Now().Before(deadline) {
		f.mu.Lock()
		for key, at := range f.firstOK {
			if (tBack.IsZero() || at.Before(tBack)) && affected(key) {
				tBack = at
			}
		}
		f.mu.Unlock()
		testenv.Pause(ctx, 20*time.Millisecond)
	}
	testenv.Pause(ctx, 500*time.Millisecond)
	stopStorm()

	ms := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return fmt.Sprintf("+%.2fs", at.Sub(tKill).Seconds())
	}
	t.Logf("timeline (from the kill -9 of %s): promotion of %s seen %s, restart %s, rejoined as replica %s, first success on its slots %s (%.2fs after the promotion)",
		victim, replica, ms(tPromoted), ms(tRestarted), ms(tRejoined), ms(tBack), tBack.Sub(tPromoted).Seconds())
	f.mu.Lock()
	defer f.mu.Unlock()
	affectedAnswers, otherAnswers, n503, slowest := f.summary(tPromoted, tRestarted)
	t.Logf("%d operations; answers by status (0: none) on the failed primary's slots %v, on the others %v", len(keys), affectedAnswers, otherAnswers)
	if !tRestarted.IsZero() {
		t.Logf("%d answers of 503 on its slots to sends between the promotion and the restart, the longest in %v", n503, slowest.Round(time.Millisecond))
	}
	if tBack.IsZero() {
		t.Errorf("no operation on the failed primary's slots succeeded within %v of the promotion", failoverRecovered)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d operations never succeeded", n)
	}
	if len(f.mixed) > 0 {
		t.Errorf("keys whose 201s disagreed: %q", f.mixed)
	}
	// Every operation ran exactly once, and its record holds what it sent
	// (read through a client that knows the new map).
	check := redisstore.New(newClusterClient(t, c.addrs), redisstore.WithPrefix(f.prefix))
	var affectedOps int
	for _, key := range keys {
		if n := f.execs[key]; n != 1 {
			t.Errorf("%s executed %d times, want 1", key, n)
			continue
		}
		if affected(key) {
			affectedOps++
		}
		e, found, err := check.Get(ctx, idempotency.Key{Key: key})
		switch {
		case err != nil:
			t.Errorf("%s: reading its record: %v", key, err)
		case !found || e.State != idempotency.StateCompleted || e.Response == nil || string(e.Response.Body) != f.bodies[key]:
			t.Errorf("%s: record %+v (found %v), want completed with %q", key, e, found, f.bodies[key])
		case f.answered[key] != f.bodies[key]:
			t.Errorf("%s: answered %q, executed %q", key, f.answered[key], f.bodies[key])
		}
	}
	if affectedOps == 0 {
		t.Errorf("no operation fell on the failed primary's slots")
	}
	t.Logf("%d of them on the failed primary's slots", affectedOps)
}

// failoverKeys bounds the operations of one failover run.
const failoverKeys = 4000

func failoverKey(n int) string { return fmt.Sprintf("fo-%04d", n%failoverKeys) }

// primaryAndReplica returns the address of the primary that owns slot, of
// its replica, and which of the failover keys (under prefix, scope "") it
// holds.
func primaryAndReplica(t *testing.T, rdb *redis.ClusterClient, slot int, prefix string) (primary, replica string, holds map[string]bool) {
	t.Helper()
	ctx := context.Background()
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var owned []redis.ClusterSlot
	for _, s := range slots {
		if s.Start <= slot && slot <= s.End {
			primary = s.Nodes[0].Addr
		}
	}
	for _, s := range slots {
		if s.Nodes[0].Addr == primary {
			owned = append(owned, s)
		}
	}
	// CLUSTER SLOTS leaves out replicas whose offset is still 0; CLUSTER
	// NODES names each replica's primary.
	nodes, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var primaryID string
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], primary+"@") {
			primaryID = f[0]
		}
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 3 && strings.Contains(f[2], "slave") && f[3] == primaryID {
			replica, _, _ = strings.Cut(f[1], "@")
		}
	}
	if primary == "" || replica == "" {
		t.Fatalf("no primary with a replica owns slot %d:\n%s", slot, nodes)
	}
	node := redis.NewClient(&redis.Options{Addr: replica})
	defer node.Close()
	pipe := node.Pipeline()
	cmds := make([]*redis.IntCmd, failoverKeys)
	for n := range cmds {
		cmds[n] = pipe.ClusterKeySlot(ctx, entryName(prefix, failoverKey(n)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	holds = map[string]bool{}
	for n, cmd := range cmds {
		for _, s := range owned {
			if v := int(cmd.Val()); s.Start <= v && v <= s.End {
				holds[failoverKey(n)] = true
			}
		}
	}
	return primary, replica, holds
}

// newHTTPClientT returns a client that keeps enough idle connections for
// the storm's fan-out.
func newHTTPClientT(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConns: 200, MaxIdleConnsPerHost: 100}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestOwnClusterPortTaken: a port taken between the pick and the node's
// bind (here taken before, which the script finds the same way) makes the
// test cluster start again on other ports, not fail the test.
func TestOwnClusterPortTaken(t *testing.T) {
	p := testenv.FreePorts(t, 1, true)
	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	picks := 0
	c := startOwnClusterPicking(t, time.Second, func() int {
		if picks++; picks == 1 {
			return p - 2 // its third node's port is held
		}
		return testenv.FreePorts(t, 6, true)
	})
	if picks != 2 {
		t.Errorf("%d picks, want 2", picks)
	}
	if len(c.addrs) != 6 {
		t.Fatalf("addrs %v, want 6", c.addrs)
	}
	for _, a := range c.addrs {
		if a == "127.0.0.1:"+strconv.Itoa(p) {
			t.Errorf("the cluster holds %s, the held port", a)
		}
		if got := replicationInfo(a, "role"); got == "" {
			t.Errorf("node %s does not answer", a)
		}
	}
}
