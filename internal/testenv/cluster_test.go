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
