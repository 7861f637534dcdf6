package testenv

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestCheckRedisCluster: the cluster check refuses an empty list, a node
// that is down and a Redis that is no cluster, and passes the test
// cluster when one is configured.
func TestCheckRedisCluster(t *testing.T) {
	opt, err := redis.ParseURL(RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
	defer cancel()
	for _, c := range []struct{ list, want string }{
		{" , ", "no address"},
		{"127.0.0.1:" + closedPort(t), "refused"},
		{opt.Addr, "cluster support disabled"},
	} {
		if err := checkRedisCluster(ctx, c.list); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("check of %q = %v, want an error saying %q", c.list, err, c.want)
		}
	}
	if list := os.Getenv(EnvRedisClusterAddrs); list != "" {
		if err := checkRedisCluster(ctx, list); err != nil {
			t.Errorf("check of the test cluster %q: %v", list, err)
		}
	}
}

// TestFreePorts: a block of free ports within SAFERETRY_TEST_PORTS,
// skipping one that is taken, and bus ports free too.
func TestFreePorts(t *testing.T) {
	base := FreePorts(t, 4, true)
	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+10001)) // the second port's bus port
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	t.Setenv(EnvTestPorts, strconv.Itoa(base)+"-"+strconv.Itoa(base+7))
	if got := FreePorts(t, 2, true); got != base+2 {
		t.Errorf("FreePorts(2, bus) in %d-%d with %d taken = %d, want %d", base, base+7, base+10001, got, base+2)
	}
	if got := FreePorts(t, 2, false); got != base {
		t.Errorf("FreePorts(2, no bus) = %d, want %d", got, base)
	}
	f, _ := run(func(tb testing.TB) string { FreePorts(tb, 9, false); return "" })
	if !f.failed || !strings.Contains(f.msg, "no 9 free") {
		t.Errorf("9 ports in a range of 8: failed %v %q, want a failure", f.failed, f.msg)
	}
}

// TestFreePortsOutsideEphemeral: unconfined, FreePorts picks ports, bus
// ports included, outside the system's ephemeral range, which outgoing
// connections take their local ports from: a port picked inside it could
// be taken by any connection before the test's server binds it (a CI run
// failed so, a cluster node's bus port "Address already in use").
func TestFreePortsOutsideEphemeral(t *testing.T) {
	lo, hi := ephemeralPorts()
	for range 20 {
		for _, c := range []struct {
			n   int
			bus bool
		}{{1, false}, {6, true}, {1, true}} {
			base := FreePorts(t, c.n, c.bus)
			ports := []int{base, base + c.n - 1}
			if c.bus {
				ports = append(ports, base+10000, base+c.n-1+10000)
			}
			for _, p := range ports {
				if p >= lo && p <= hi {
					t.Fatalf("FreePorts(%d, bus %v) = %d: port %d is in the ephemeral range %d-%d", c.n, c.bus, base, p, lo, hi)
				}
			}
		}
	}
}

// TestEphemeralPorts: the range is read from the system and is sane.
func TestEphemeralPorts(t *testing.T) {
	lo, hi := ephemeralPorts()
	if lo <= 0 || hi > 65535 || hi < lo {
		t.Fatalf("ephemeralPorts() = %d, %d", lo, hi)
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 && (f[0] != strconv.Itoa(lo) || f[1] != strconv.Itoa(hi)) {
			t.Errorf("ephemeralPorts() = %d, %d, the system says %s", lo, hi, strings.Join(f, "-"))
		}
	}
}
