package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/internal/clock"
)

// reloadGap is the least time between two cluster state reloads one Store
// asks for. While a dead primary's replica is being promoted (about
// cluster-node-timeout plus an election), every reload still shows the old
// map; reloading every reloadGap finds the new one within a quarter of a
// second of the promotion, at the cost of a few CLUSTER SLOTS per second
// during the outage only. go-redis adds a cooldown of its own (200 ms) and
// never runs two reloads at once.
const reloadGap = 250 * time.Millisecond

// reloader asks a *redis.ClusterClient to reload its slot map when a node
// cannot be reached. go-redis reloads it on its own only after a MOVED or
// ASK reply, or every ClusterOptions.ClusterStateReloadInterval (60 s by
// default); a primary that died sends neither, so without this the Store
// would keep dialling the dead node for up to a minute after its replica
// took over. The zero value, or one whose cluster is nil, does nothing;
// it is safe for concurrent use.
type reloader struct {
	cluster *redis.ClusterClient // nil: not a cluster, nothing to reload
	last    atomic.Int64         // when the last reload was asked for, Unix ns of clock.MonotonicNow
}

// failed looks at the error of a call to the cluster and asks for a reload
// (at most one every reloadGap) when it says a node could not be reached,
// or that the slot map is out of date (see staleMap).
func (r *reloader) failed(err error) {
	if r.cluster == nil || err == nil || !(unreachable(err) || staleMap(err)) {
		return
	}
	// The monotonic clock's: a step back of the wall clock must not hold
	// reloads off until it has caught up.
	now := clock.MonotonicNow().UnixNano()
	last := r.last.Load()
	if now-last < int64(reloadGap) || !r.last.CompareAndSwap(last, now) {
		return
	}
	r.cluster.ReloadState(context.Background())
}

// unreachable reports whether err says that the node a command went to is
// gone or not answering (refused or timed-out dials, reset or closed
// connections, read and write timeouts), or that the cluster is
// reconfiguring (CLUSTERDOWN): not a reply from a working node, and not
// the caller's context ending.
func unreachable(err error) bool {
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &op):
		return true // a dial, read or write on the node's connection failed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return redis.HasErrorPrefix(err, "CLUSTERDOWN")
}

// staleMap reports whether err is a node's reply that the client's slot
// map is out of date: MOVED, ASK, or READONLY from a primary demoted to a
// replica. go-redis follows these and reloads for commands it routes
// itself; WithWait's pipeline goes to one node, so they come back to the
// Store, which must ask for the reload.
func staleMap(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED ") || redis.HasErrorPrefix(err, "ASK ") || redis.HasErrorPrefix(err, "READONLY ")
}
