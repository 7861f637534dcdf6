package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

// startRedis starts a redis-server of the test's own on a free loopback port
// with args, in a temporary directory, and kills it at the end. It skips the
// test (fails it under SAFERETRY_REQUIRE_SERVICES=1) when redis-server is not
// on PATH. It returns the server's address once it answers PING.
func startRedis(t testing.TB, cluster bool, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server is not on PATH; install Redis to run this test")
	}
	port := testenv.FreePorts(t, 1, cluster)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir}, args...)
	if cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf")
	}
	cmd := exec.Command(bin, args...)
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	testenv.Eventually(t, "redis-server on "+addr+" answers PING", func() bool {
		select {
		case <-exited:
			t.Fatalf("redis-server %q exited:\n%s", args, out)
		default:
		}
		return rdb.Ping(context.Background()).Err() == nil
	})
	return addr
}

// settings gives the problems as "setting=value" lines, sorted.
func settings(problems []redisstore.ConfigProblem) []string {
	var s []string
	for _, p := range problems {
		s = append(s, p.Setting+"="+p.Value)
	}
	sort.Strings(s)
	return s
}

func check(t *testing.T, rdb redis.UniversalClient) []redisstore.ConfigProblem {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	problems, err := redisstore.New(rdb).Check(ctx)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, p := range problems {
		t.Logf("%s: %s", p.Addr, p)
		if p.Why == "" || !strings.HasSuffix(p.String(), p.Why) {
			t.Errorf("problem %+v: String() = %q, want it to end with a Why", p, p)
		}
	}
	return problems
}

// TestCheckSharedRedis reads the shared Redis's settings (never changing
// them) and expects Check to say what they imply: the test services run
// without persistence, which Check must report.
func TestCheckSharedRedis(t *testing.T) {
	rdb := newClient(t)
	ctx := context.Background()
	get := func(name string) string {
		v, err := rdb.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", name, err)
		}
		return v[name]
	}
	policy, aof, save, fsync := get("maxmemory-policy"), get("appendonly"), get("save"), get("appendfsync")
	t.Logf("shared Redis: maxmemory-policy %q, appendonly %q, save %q, appendfsync %q", policy, aof, save, fsync)
	var want []string
	if policy != "noeviction" {
		want = append(want, "maxmemory-policy="+policy)
	}
	switch {
	case aof == "no":
		want = append(want, "appendonly=no")
	case fsync == "no":
		want = append(want, "appendfsync=no")
	}
	sort.Strings(want)

	problems := check(t, rdb)
	if got := settings(problems); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	if aof == "no" && save == "" {
		for _, p := range problems {
			if p.Setting == "appendonly" && (!strings.Contains(p.Why, "neither AOF nor RDB") || p.Addr != rdb.Options().Addr) {
				t.Errorf("persistence problem = %+v, want it to say neither AOF nor RDB is on, for %s", p, rdb.Options().Addr)
			}
		}
	}
}

// TestCheckOwnServers starts servers of the test's own with the settings
// under test, CONFIG readable or disabled.
func TestCheckOwnServers(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string // sorted "setting=value"
		why  string   // in every problem's Why
	}{
		{"evicting policy, AOF always", []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "allkeys-lru"},
			[]string{"maxmemory-policy=allkeys-lru"}, "evicts keys"},
		{"volatile policy", []string{"--save", "", "--appendonly", "yes", "--maxmemory-policy", "volatile-lru"},
			[]string{"maxmemory-policy=volatile-lru"}, "volatile-* policies evict them too"},
		{"safe: noeviction, AOF everysec", []string{"--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction"},
			nil, ""},
		{"RDB snapshots only", []string{"--save", "3600 1", "--appendonly", "no", "--maxmemory-policy", "noeviction"},
			[]string{"appendonly=no"}, "only RDB snapshots"},
		{"AOF left to the kernel", []string{"--save", "", "--appendonly", "yes", "--appendfsync", "no", "--maxmemory-policy", "noeviction"},
			[]string{"appendfsync=no"}, "kernel"},
		{"CONFIG disabled, read from INFO", []string{"--rename-command", "CONFIG", "", "--save", "", "--appendonly", "no", "--maxmemory-policy", "volatile-ttl"},
			[]string{"appendonly=no", "maxmemory-policy=volatile-ttl"}, ""},
		{"CONFIG disabled, AOF on", []string{"--rename-command", "CONFIG", "", "--save", "", "--appendonly", "yes", "--maxmemory-policy", "noeviction"},
			nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := startRedis(t, false, c.args...)
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			problems := check(t, rdb)
			if got := settings(problems); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("problems %q, want %q", got, c.want)
			}
			for _, p := range problems {
				if p.Addr != addr || !strings.Contains(p.Why, c.why) {
					t.Errorf("problem %+v, want Addr %s and a Why that says %q", p, addr, c.why)
				}
				if strings.Contains(c.name, "CONFIG disabled") && p.Setting == "appendonly" && !strings.Contains(p.Why, "cannot be read") {
					t.Errorf("with CONFIG disabled, %+v should say that the snapshots cannot be read", p)
				}
			}
		})
	}
}

// TestCheckEveryClusterPrimary: with a cluster client, Check reads every
// primary and names the one with each problem.
func TestCheckEveryClusterPrimary(t *testing.T) {
	a := startRedis(t, true, "--save", "", "--appendonly", "yes", "--appendfsync", "no", "--maxmemory-policy", "noeviction")
	b := startRedis(t, true, "--save", "", "--appendonly", "yes", "--maxmemory-policy", "allkeys-random")
	ctx := context.Background()
	ca := redis.NewClient(&redis.Options{Addr: a})
	defer ca.Close()
	cb := redis.NewClient(&redis.Options{Addr: b})
	defer cb.Close()
	host, portB, _ := net.SplitHostPort(b)
	for _, err := range []error{
		ca.ClusterAddSlotsRange(ctx, 0, 8191).Err(),
		cb.ClusterAddSlotsRange(ctx, 8192, 16383).Err(),
		ca.ClusterMeet(ctx, host, portB).Err(),
	} {
		if err != nil {
			t.Fatalf("cluster set-up: %v", err)
		}
	}
	testenv.Eventually(t, "the two-primary cluster is up", func() bool {
		for _, c := range []*redis.Client{ca, cb} {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:2") {
				return false
			}
		}
		return true
	})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{a}})
	defer cluster.Close()
	var got []string
	for _, p := range check(t, cluster) {
		got = append(got, p.Addr+" "+p.Setting+"="+p.Value)
	}
	want := []string{a + " appendfsync=no", b + " maxmemory-policy=allkeys-random"}
	sort.Strings(want) // Check orders the problems by Addr
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// TestCheckUnreachable: a server that cannot be reached is an error, not a
// problem.
func TestCheckUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	problems, err := redisstore.New(rdb).Check(context.Background())
	if err == nil || problems != nil || !strings.HasPrefix(err.Error(), "redisstore: ") {
		t.Fatalf("Check of %s = %v, %v; want no problems and a redisstore error", addr, problems, err)
	}
}
