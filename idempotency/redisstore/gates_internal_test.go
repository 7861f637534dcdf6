package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/internal/gate"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestGatesForgetGonePrimaries: a cluster whose primaries are replaced
// (failovers, nodes rescheduled on new addresses) must not leave a gate
// behind for every address it ever had; only the gates of the primaries
// in the client's map, and those with calls still in them, stay. The
// client's map comes from ClusterSlots, so no node is dialled (the
// addresses are TEST-NET's: go-redis would rewrite loopback ones).
func TestGatesForgetGonePrimaries(t *testing.T) {
	var gen atomic.Int64
	addr := func(gen int64, i int) string { return "192.0.2.1:" + strconv.Itoa(40000+3*int(gen)+i) }
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			g := gen.Load()
			return []redis.ClusterSlot{
				{Start: 0, End: 5460, Nodes: []redis.ClusterNode{{Addr: addr(g, 0)}}},
				{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{{Addr: addr(g, 1)}}},
				{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{{Addr: addr(g, 2)}}},
			}, nil
		},
	})
	t.Cleanup(func() { cc.Close() })
	ctx := context.Background()
	g := newGates(cc)
	names := make([]string, 30)
	for i := range names {
		names[i] = fmt.Sprintf("entry-%d", i) // spread over the three slot ranges
	}
	count := func() (n int) {
		g.byNode.Range(func(any, any) bool { n++; return true })
		return n
	}
	var held gate.Gate // a gone primary's gate with a call still in it
	const generations = 6
	for i := int64(0); i < generations; i++ {
		gen.Store(i)
		cc.ReloadState(ctx)
		testenv.Eventually(t, "the client's map lists the primaries of generation "+strconv.FormatInt(i, 10), func() bool {
			node, err := cc.MasterForKey(ctx, names[0])
			if err == nil {
				a := node.Options().Addr
				if a == addr(i, 0) || a == addr(i, 1) || a == addr(i, 2) {
					return true
				}
			}
			// go-redis reloads lazily, in the background, and a reload
			// that fails forgets the one asked for meanwhile: ask again.
			cc.ReloadState(ctx)
			return false
		})
		for _, name := range names {
			g.forKey(ctx, name)
		}
		if i == 0 {
			held = g.forKey(ctx, names[0])
			if err := held.Enter(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The current three, and generation 0's that a call is still in: a
	// gate dropped with calls in it would let later calls to its node
	// past the bound.
	if n := count(); n != 4 {
		t.Errorf("after %d generations of 3 primaries, one call still in a gate of the first: %d gates, want 4 (the current primaries' and the one held)", generations, n)
	}
	held.Leave()
}
