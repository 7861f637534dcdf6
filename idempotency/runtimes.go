package idempotency

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// runTimes keeps, per route, a moving estimate of how long the handler
// runs, so that a 409 for a key in progress can tell the client when the
// holder will likely be done rather than when it would be presumed dead.
// A route is the method and the ServeMux pattern the request matched
// (Request.Pattern, set when the Middleware wraps a route's handler), or
// its path otherwise; a duplicate has the same method and path as the
// request it repeats, since both are in the fingerprint. The table holds at
// most maxRoutes routes; requests on routes beyond them share one
// estimate. It is safe for concurrent use.
type runTimes struct {
	last   atomic.Pointer[routeTime] // the route looked up last: most services have one or a few
	mu     sync.RWMutex
	routes map[route]*routeTime
	other  routeTime // the routes beyond maxRoutes
}

type route struct{ method, path string }

// routeTime is the estimate of one route, in nanoseconds, 0 until a run is
// seen.
type routeTime struct {
	route route
	est   atomic.Int64
}

// maxRoutes bounds the routes runTimes keeps apart: paths with identifiers
// in them would grow the table without end.
const maxRoutes = 1024

// maxRoutePath is the longest path kept as a route of its own; longer ones
// share the estimate of the routes beyond the table, so that the table
// holds at most maxRoutes short strings.
const maxRoutePath = 128

// runTimeWeight is the weight of a new run in the moving estimate, 1/5:
// the estimate follows a change of the handler's speed within a few runs.
const runTimeWeight = 5

func routeOf(r *http.Request) route {
	if r.Pattern != "" {
		return route{r.Method, r.Pattern}
	}
	return route{r.Method, r.URL.Path}
}

// ran takes in a run of q's handler that took d, when it did the work a
// duplicate waits for: a 2xx answer, its context (hctx) not ended. A run
// cut short by a lost lease, a client gone or a failure says nothing of
// how long the work takes, nor does a 4xx refusal.
func (q *request) ran(d time.Duration, hctx context.Context) {
	if s := q.rec.statusCode(); s < 200 || s > 299 || hctx.Err() != nil {
		return
	}
	q.m.runs.observe(q.r, d)
}

// slot returns the estimate of rt, adding it to the table when create is
// set and there is room; nil means no run of rt was seen.
func (t *runTimes) slot(rt route, create bool) *atomic.Int64 {
	if l := t.last.Load(); l != nil && l.route == rt {
		return &l.est
	}
	if len(rt.path) > maxRoutePath {
		return &t.other.est
	}
	t.mu.RLock()
	s, ok := t.routes[rt]
	full := len(t.routes) >= maxRoutes
	t.mu.RUnlock()
	switch {
	case ok:
		t.last.Store(s)
		return &s.est
	case full:
		return &t.other.est
	case !create:
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.routes[rt]; ok {
		return &s.est
	}
	if len(t.routes) >= maxRoutes {
		return &t.other.est
	}
	if t.routes == nil {
		t.routes = make(map[route]*routeTime)
	}
	s = &routeTime{route: rt}
	t.routes[rt] = s
	t.last.Store(s)
	return &s.est
}

// observe takes in a run of the handler for r that took d.
func (t *runTimes) observe(r *http.Request, d time.Duration) {
	s := t.slot(routeOf(r), true)
	d = max(d, 1) // 0 means no run seen
	for {
		old := s.Load()
		est := int64(d)
		if old != 0 {
			est = old + (int64(d)-old)/runTimeWeight
		}
		if s.CompareAndSwap(old, max(est, 1)) {
			return
		}
	}
}

// estimate returns the expected running time of the handler for r, or 0
// when no run was seen.
func (t *runTimes) estimate(r *http.Request) time.Duration {
	if s := t.slot(routeOf(r), false); s != nil {
		return time.Duration(s.Load())
	}
	return 0
}

// inProgressRetryAfter is the Retry-After, in whole seconds, of a 409 for
// a key that another request holds for left more: the expected running
// time of the handler, rounded up, at least 1 s (also when it is unknown,
// 0), and no more than left rounded up (when the holder would be presumed
// dead and the key taken over).
func inProgressRetryAfter(expected, left time.Duration) int {
	return min(retryAfterSeconds(expected), retryAfterSeconds(left))
}
