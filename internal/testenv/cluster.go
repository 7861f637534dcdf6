package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// EnvRedisClusterAddrs names the variable that holds the addresses of a
// Redis Cluster for tests, comma-separated (one is enough to find the
// others); .ci/redis-cluster.sh starts one and prints them.
const EnvRedisClusterAddrs = "SAFERETRY_REDIS_CLUSTER_ADDRS"

// ExampleRedisClusterAddrs is what .ci/redis-cluster.sh start prints with
// its default ports.
const ExampleRedisClusterAddrs = "127.0.0.1:17000,127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003,127.0.0.1:17004,127.0.0.1:17005"

// RedisCluster is SAFERETRY_REDIS_CLUSTER_ADDRS, checked with a TCP dial of
// every address and CLUSTER INFO on each: every node must say
// cluster_state:ok.
var RedisCluster = Service{EnvRedisClusterAddrs, ExampleRedisClusterAddrs, checkRedisCluster}

// RedisClusterAddrs returns the addresses in SAFERETRY_REDIS_CLUSTER_ADDRS,
// or skips tb (fails it under SAFERETRY_REQUIRE_SERVICES=1) when it is
// unset.
func RedisClusterAddrs(tb testing.TB) []string {
	tb.Helper()
	return splitAddrs(RedisCluster.URL(tb))
}

func splitAddrs(s string) []string {
	var addrs []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// checkRedisCluster dials every address first, so that a node that is down
// fails at once, then asks each for its view of the cluster.
func checkRedisCluster(ctx context.Context, list string) error {
	addrs := splitAddrs(list)
	if len(addrs) == 0 {
		return fmt.Errorf("no address in %q", list)
	}
	for _, addr := range addrs {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		conn.Close()
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 1})
		info, err := rdb.ClusterInfo(ctx).Result()
		rdb.Close()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: the cluster's state is not ok:\n%s", addr, strings.TrimSpace(info))
		}
	}
	return nil
}

// EnvTestPorts names the variable that confines the loopback ports tests
// start servers of their own on (FreePorts) to a range "low-high"; unset,
// they are picked at random.
const EnvTestPorts = "SAFERETRY_TEST_PORTS"

// FreePorts returns the first of n consecutive loopback ports that are free,
// and whose cluster bus ports (each plus 10000) are free too when bus is
// set: room for n servers of the test's own. The ports come from the range
// in SAFERETRY_TEST_PORTS when it is set; otherwise they are picked at
// random outside the system's ephemeral range (ephemeralPorts), where no
// outgoing connection takes its local port: a port picked inside it could
// be taken by any connection between the check and the server's bind.
// Nothing holds them: a server must take them soon.
func FreePorts(tb testing.TB, n int, bus bool) int {
	tb.Helper()
	var lo, hi int
	if r := os.Getenv(EnvTestPorts); r != "" {
		if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err != nil || lo <= 0 || hi < lo || hi > 65535 {
			tb.Fatalf("%s=%q is not a range low-high", EnvTestPorts, r)
		}
	}
	for try := 0; try < 100; try++ {
		base := lo + try*n
		if lo == 0 {
			var ok bool
			if base, ok = randomBase(n, bus); !ok {
				break
			}
		} else if base+n-1 > hi {
			break
		}
		if (bus && base+n-1+10000 > 65535) || base+n-1 > 65535 {
			continue
		}
		if portsFree(base, n, bus) {
			return base
		}
	}
	tb.Fatalf("testenv: no %d free consecutive loopback ports (bus ports too: %v; %s=%q)", n, bus, EnvTestPorts, os.Getenv(EnvTestPorts))
	return 0
}

// randomBase picks the first of n ports at random among those whose ports,
// and bus ports when bus is set, all lie in 10000-65535 and outside the
// ephemeral range; false when a thousand picks found none.
func randomBase(n int, bus bool) (int, bool) {
	elo, ehi := ephemeralPorts()
	outside := func(p int) bool { return p+n-1 < elo || p > ehi }
	last := 65535 - (n - 1)
	if bus {
		last -= 10000
	}
	for range 1000 {
		b := 10000 + rand.IntN(last-10000+1)
		if outside(b) && (!bus || outside(b+10000)) {
			return b, true
		}
	}
	return 0, false
}

// portsFree reports whether base..base+n-1 (and each plus 10000 when bus is
// set) can be listened on.
func portsFree(base, n int, bus bool) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for p := base; p < base+n; p++ {
		ports := []int{p}
		if bus {
			ports = append(ports, p+10000)
		}
		for _, q := range ports {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				return false
			}
			held = append(held, l)
		}
	}
	return true
}

// ephemeralPorts returns the system's range of ephemeral ports
// (/proc/sys/net/ipv4/ip_local_port_range), 32768-60999, Linux's default,
// when it cannot be read.
func ephemeralPorts() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if _, err := fmt.Sscanf(string(b), "%d %d", &lo, &hi); err == nil && lo > 0 && hi >= lo && hi <= 65535 {
			return lo, hi
		}
	}
	return 32768, 60999
}
