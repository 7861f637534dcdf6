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
type gates struct {
	one     gate.Gate            // the pool's, or a cluster's when the key's node is unknown
	cluster *redis.ClusterClient // nil: not a cluster
	size    int                  // the pool size of each node
	byNode  sync.Map             // a cluster primary's address -> its gate.Gate
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
		return v.(gate.Gate)
	}
	v, _ := g.byNode.LoadOrStore(addr, gate.New(g.size))
	return v.(gate.Gate)
}
