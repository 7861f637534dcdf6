package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/internal/gate"
)

// gates keeps a quarter of every connection pool free for Renew, Complete
// and Release (see internal/gate): one gate for a client with one pool,
// one per primary for a *redis.ClusterClient, whose pools are per node. A
// gate shared by a cluster's nodes would let the request-path calls to one
// node that hangs (stopped, or cut off by the network, until its failover
// after cluster-node-timeout) take every place while they wait for their
// timeouts, and the calls to the healthy nodes would queue behind them:
// one hung node would stop the whole cluster. The zero value is not
// usable; it is safe for concurrent use.
//
// A primary's gate goes when the cluster's nodes change (a gate is made
// for an address seen for the first time) and the client's map no longer
// sends to it the entry it was made for, once no call is in it: without
// that, every address a cluster ever had (failovers, nodes rescheduled on
// new addresses) would keep a gate for the life of the Store. An address
// that comes back gets a new gate, as go-redis gives it a new pool.
type gates struct {
	one     gate.Gate            // the pool's, or a cluster's when the key's node is unknown
	cluster *redis.ClusterClient // nil: not a cluster
	size    int                  // the pool size of each node
	byNode  sync.Map             // a cluster primary's address -> its *nodeGate
}

// nodeGate is the gate of a cluster primary, and the name of an entry
// that the primary owned when the gate was made, by which prune tells
// whether it still is the primary of that slot.
type nodeGate struct {
	gate gate.Gate
	name string
}

func newGates(rdb redis.UniversalClient) gates {
	size := poolSize(rdb)
	cluster, _ := rdb.(*redis.ClusterClient)
	return gates{one: gate.New(size), cluster: cluster, size: size}
}

// forKey returns the gate of the pool that a call on the entry name
// takes a connection from: for a cluster, that of the primary that owns
// its slot by the client's map (go-redis sends it there, or follows a
// redirection from there).
func (g *gates) forKey(ctx context.Context, name string) gate.Gate {
	if g.cluster == nil {
		return g.one
	}
	node, err := g.cluster.MasterForKey(ctx, name)
	if err != nil {
		return g.one // the call will fail the same way, or find its node
	}
	addr := node.Options().Addr
	if v, ok := g.byNode.Load(addr); ok {
		return v.(*nodeGate).gate
	}
	v, loaded := g.byNode.LoadOrStore(addr, &nodeGate{gate: gate.New(g.size), name: name})
	if !loaded {
		g.prune(ctx, addr)
	}
	return v.(*nodeGate).gate
}

// prune drops the gates, other than that of the address just added, whose
// entry the client's map sends to another primary now, and that no call
// is in. It reads the map the client holds, without a round trip. A gate
// with calls in it stays, so that they never share their node's places
// with a new gate's; a call that finds a gate just before prune drops it
// may still enter it, which lets at most that call past the bound of a
// node that the map no longer lists for its entry.
func (g *gates) prune(ctx context.Context, added string) {
	g.byNode.Range(func(k, v any) bool {
		addr, ng := k.(string), v.(*nodeGate)
		if addr == added || ng.gate.InUse() > 0 {
			return true
		}
		if node, err := g.cluster.MasterForKey(ctx, ng.name); err == nil && node.Options().Addr != addr {
			g.byNode.CompareAndDelete(addr, ng)
		}
		return true
	})
}
